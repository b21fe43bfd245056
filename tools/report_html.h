// `--report html`: a self-contained HTML page for a stray write (harness/guard_picture.h): the
// buffer drawn as a grid of elements in the rows and columns of its declared view, the output
// views in blue, the bytes the launch must leave alone in grey, the red zones in amber, and every
// element holding a stray byte in red, the first one outlined in black with its row, column and
// byte written out. No scripts, fonts or images are loaded from anywhere: one file to open or attach.
//
//   GuardPictureSink sink;
//   { ScopedGuardPictureSink on(sink); r = run_case_text(c); }
//   if (auto p = sink.picture_for(*r.verdict)) path = write_guard_picture_html(*p, "mlacheck-report", "R1", header);
#pragma once

#include <string>

#include "harness/guard_picture.h"

namespace mlacheck {

// The colours of the page, for tests that look at a screenshot of it (rgb hex, no '#').
inline constexpr const char* kPictureStrayColour = "e41a1c";   // an element holding a stray byte
inline constexpr const char* kPictureOutputColour = "9ecae1";  // an element of an output view
inline constexpr const char* kPictureFrameColour = "123456";   // the 1-pixel frame around the grid

// The grid's window: at most this many rows and columns of elements, around the first stray.
inline constexpr int kPictureMaxRows = 48;
inline constexpr int kPictureMaxColumns = 64;

// The page for p. `context`: one line saying what ran (the repro header, the check row), or "".
std::string render_guard_picture_html(const GuardPicture& p, const std::string& context);

// Writes the page into dir (made when missing) as <stem>.html, the stem's characters other than
// letters, digits, '.', '_' and '-' replaced by '-'; returns its path. Throws mlacheck::Error, one
// line, when the folder cannot be made or the file cannot be written.
std::string write_guard_picture_html(const GuardPicture& p, const std::string& dir, const std::string& stem,
                                     const std::string& context);

// The page of the picture in `sink` that belongs to `verdict` (a run's final verdict), written as
// write_guard_picture_html does; "" when the verdict is not a stray write the sink saw.
std::string write_picture_for_verdict(const GuardPictureSink& sink, const std::string& verdict, const std::string& dir,
                                      const std::string& stem, const std::string& context);

// What a FAIL line gets appended when a page was written: "; picture: PATH" ("" for no page).
std::string picture_note(const std::string& path);

// Reruns a failed case with a sink installed, in a child process (core/backend/isolate.h: a crash
// or a hang there is no picture, never the command's end), and writes the page when its verdict is
// a stray write: the page's path, or "" when there is none (the case passed, failed otherwise, or
// crashed). For `check`, whose suites ran in children of their own. Throws mlacheck::Error for a
// page that cannot be written.
std::string picture_of_case(const std::string& case_text, const std::string& backend, const std::string& impl,
                            const std::string& dir, const std::string& stem, const std::string& context,
                            double timeout_seconds);

// Where the picture of the first stray lies on the page's grid, as the FAIL line and the page say
// it: "row 3, column 0, byte 0 of its 4".
std::string picture_first_stray_place(const GuardPicture& p);

}  // namespace mlacheck
