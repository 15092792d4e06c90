"""`python -m teenygrad`: which pieces of teenygrad are yours (`mine`, the default), or write the learner's edition
(`learner [DIR]`). See `teenygrad.edition`."""
from teenygrad.edition import main

if __name__ == "__main__":  # importing this module (pkgutil.walk_packages does) must not run the command
    raise SystemExit(main())
