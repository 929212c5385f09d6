"""The ``cloudtrain`` command line: argparse, its own commands, completion, colour and progress on
a terminal."""
