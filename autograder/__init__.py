"""teenygrad's autograder: nbgrader's course directory, gradebook, autograde and feedback, with the
hidden tests judged outside the learner's process (see autograder/judges and teenygrad/grading.py)."""
