"""`python -m bayesval`: the command line, as the `bayesval` command runs it (`bayesval.cli`)."""

from bayesval.cli import main

if __name__ == "__main__":
    main()
