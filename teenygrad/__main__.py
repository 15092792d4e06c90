"""`python -m teenygrad`: which pieces of teenygrad are yours (`mine`, the default), or write the learner's edition
(`learner [DIR]`). See `teenygrad.edition`."""
from teenygrad.edition import main

raise SystemExit(main())
