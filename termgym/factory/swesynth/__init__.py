"""The SWE-SYNTH factory: from a repository to validated, bundled task records.

* :mod:`.inject` and :mod:`.bugs` — the bug operators (AST-guided, format-preserving);
  :mod:`.breaker` and :mod:`.llm` — the optional LLM breaker and report writer;
* :mod:`.screen` (with its pytest plugin :mod:`.screen_plugin`) — which tests each candidate breaks,
  from one traced baseline run per project; :mod:`.validate` — running tests and the keep rules;
* :mod:`.report`, :mod:`.report_check`, :mod:`.failures` — user-style bug reports and their checks;
* :mod:`.quality` — is a task solvable from its report (checked at generation), :mod:`.audit` —
  the same checks over a suite (``termgym swesynth audit``); :mod:`.plausible` — the bug kinds no
  person writes, kept out; :mod:`.card` — the suite card measured from the records;
* :mod:`.generate` — the pipeline (``termgym swesynth generate``); :mod:`.bundle` — the bundled
  suite, resumable (``termgym swesynth bundle``); :mod:`.corpus` — the corpus projects;
* :mod:`.behaviour_record` — recording the behaviour check; :mod:`.selection_build` — the
  per-project coverage maps the fast grades read; :mod:`.adapters`, :mod:`.patches` — patch helpers;
* :mod:`.project_add` — a PyPI sdist made into a checked project folder (``termgym swesynth add-project``).

The runtime it feeds is :mod:`termgym.tasks.swesynth` (records, suite, task, grading); what both
need (which paths are source, the tree copy, the test-command selection, the Python parser) lives
there, once.
"""
