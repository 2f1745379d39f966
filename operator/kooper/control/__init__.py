"""The controller's decisions, without I/O: one ``step`` that every runner calls.

The operator (``kooper.shell``), the simulator (``kooper.sim``) and ``kooper replay``
gather their inputs in their own way and then all call ``control.step.step``; what it
returns (ConfigMap writes and deletes in order, the WorkerGroup status, Events,
metric updates and the next memory) is executed by the caller.
"""
