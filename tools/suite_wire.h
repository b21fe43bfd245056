// What a row's children tell the parent (tools/suite_runner.cpp), as text that survives a pipe and
// a file: a SuiteResult as one line through the isolation pipe, each finding as one line of the
// found file (written as it is found, so a later crash of the child loses none), and a tally in
// the progress file's head. Fields are separated by control bytes no case text or verdict holds:
// a result's fields by 0x1f (its newlines sent as 0x1e), a finding's by 0x1c, a list's items
// (findings, a tally's properties) by 0x1d.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tools/suite_runner.h"

namespace mlacheck::suite_wire {

// s split at every sep: n separators give n + 1 fields (empty ones kept).
std::vector<std::string> split_on(const std::string& s, char sep);

// A finding as fields separated by 0x1c; unpack gives false for text of another shape.
std::string pack_finding(const SuiteFinding& f);
bool unpack_finding(const std::string& s, SuiteFinding& f);

// What each property got, for the progress file's head: no newline or tab inside (a reason's are
// made spaces).
std::string pack_tally(const std::map<std::string, PropertyTally>& tally);
std::map<std::string, PropertyTally> unpack_tally(const std::string& s);

// The result of a child as one line ("suite-result" and its fields); deserialize gives false for a
// line that is not one (a child's other message).
std::string serialize(const SuiteResult& r);
bool deserialize(const std::string& s, SuiteResult& r);

// A finding as one line of the found file (without its '\n'), and every finding of such a file
// (a missing file: none; a line of another shape: skipped).
std::string found_line(const SuiteFinding& f);
std::vector<SuiteFinding> read_found(const std::string& path);

}  // namespace mlacheck::suite_wire
