"""Task factories: the code that makes tasks, kept apart from the runtime that serves them.

``gym.make`` never imports this package: the runtime (:mod:`termgym.tasks`) reads the task records a
factory wrote. A factory may import the runtime (to validate what it makes with the same grader);
the runtime never imports a factory (``tests/core/test_layers.py``).
"""
