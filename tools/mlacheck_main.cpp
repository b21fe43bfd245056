// The mlacheck executable: its command line is tools/mlacheck.cpp's cli_main (tools/cli_main.h).
#include "tools/cli_main.h"

int main(int argc, char** argv) { return mlacheck::cli_main(argc, argv); }
