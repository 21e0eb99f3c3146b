"""The command line: click commands, what they print, how errors become exits."""
