"""The simulator's extension points (``FaultHooks``) and the run without faults
(``NoFaults``), which every fault implementation extends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from kooper.control import step as control
from kooper.core import ids, model
from kooper.protocol import messages
from kooper.sdk import session as sdk_session
from kooper.sim import scenarios
from kooper.sim.pod import Pod

if TYPE_CHECKING:
    from kooper.sim.runner import Sim


class FaultHooks(Protocol):
    """The simulator's extension points: what a run's injected faults may change.

    ``Sim`` calls each at one point of its model; ``NoFaults`` is the run without any.
    A fault implementation (``sim.chaos.HardFaults``, ``sim.leaders.Terms``) is handed
    the ``Sim`` once (``attach``). It may read the run's state and call the model's
    public steps, each documented where it is defined: ``Sim.play``,
    ``Sim.apply_step`` (a scenario step) and ``Sim.respawn`` (``runner``); ``spawn``,
    ``live_pod``, ``emit`` and ``trigger_round`` (``sim.world``); ``stop_all``
    (``sim.member_side``); ``execute``, ``land``, ``write_document``, ``record_audit``
    and ``suspend`` (``sim.operator_side``). It calls none of the model's private methods."""

    def attach(self, sim: Sim) -> Mapping[str, Callable[..., None]]:
        """Bind to ``sim`` (before ``run``); returns the clock events the faults schedule,
        by name, with their handlers."""
        ...

    def step(self, step: scenarios.Step) -> scenarios.Step:
        """The scenario step to play instead of ``step`` (a kill becomes a force delete)."""
        ...

    def force_delete(self, step: scenarios.Step) -> ids.WorkerId | None:
        """Play a ``FORCE_DELETE`` step (which the simulator does not model itself); returns
        the pod it touched, as ``Sim`` does for a kill."""
        ...

    def partitioned(self, pod: Pod) -> None:
        """``pod`` was just cut off from the API by a scenario step."""
        ...

    def orphan(self, name: ids.WorkerId, token: int) -> Pod | None:
        """A live process named ``name`` started as ``token`` that is no longer its pod's
        (force-deleted, running on), or None."""
        ...

    def process_ends(self, pod: Pod) -> bool:
        """``pod``'s session ends its process at its deadline; True when the faults saw to
        it (an orphan's process just ends), False to restart it as the simulator does."""
        ...

    def batch(self, pod: Pod, actions: list[sdk_session.Action]) -> None:
        """``pod``'s session is about to run ``actions`` (stops or starts)."""
        ...

    def outgoing_report(self, pod: Pod, member: model.Member) -> model.Member:
        """What the report ``pod`` sends says (a forger claims more than ``member``)."""
        ...

    def report(self, name: ids.WorkerId, token: int) -> bool:
        """A report of ``name`` (as ``token``) reaches its Lease; False: it never lands."""
        ...

    def departing(self, name: ids.WorkerId) -> None:
        """``name``'s pod vanishes or its worker leaves (the operator may drop it next)."""
        ...

    def declare(self, pod: Pod) -> bool:
        """The cut-off ``pod`` is past lease + margin; True when the faults saw to it (the
        operator's own liveness rule), False to remove it as the simulator does."""
        ...

    def inputs(self, inputs: control.Inputs) -> control.Inputs:
        """What the operator reads from the API, given what the simulator models."""
        ...

    def api_unreachable(self) -> bool:
        """Whether the API is down now: the operator's rounds and deadlines wait."""
        ...

    def after_round(self, epoch: int) -> None:
        """A round event of operator process ``epoch`` was handled (planned or not)."""
        ...

    def stalls(self, decided: control.Step, plan: model.Plan,
               writes: tuple[control.Write, ...]) -> bool:
        """Whether the operator stalls part-way through this round's ``writes`` (the faults
        then made what it made); False to go on as the simulator does."""
        ...

    def lands(self, write: control.Write) -> bool:
        """Whether the operator's ``write`` lands (a fenced term's stale write does not)."""
        ...

    def new_term(self) -> bool:
        """A new operator process is about to restore; False: it waits (the faults start
        it again later). The faults may act first (a new leader's fence)."""
        ...

    def order(self, writes: tuple[control.Write, ...]) -> tuple[control.Write, ...]:
        """The order the operator makes a round's ``writes`` in (``Step.writes``)."""
        ...

    def crash_prefix(self, count: int) -> int | None:
        """How many of ``count`` writes an operator dying mid-sequence made; None: drawn."""
        ...

    def document(self, message: messages.Assignment) -> messages.Assignment:
        """The document the operator writes for ``message``."""
        ...


class NoFaults:
    """The run without injected faults: every ``FaultHooks`` point as the simulator models
    it. Fault implementations extend it (each calls ``super()`` where it adds to another
    implementation's effect)."""

    sim: Sim

    def attach(self, sim: Sim) -> Mapping[str, Callable[..., None]]:
        """See ``FaultHooks``."""
        self.sim = sim
        return {}

    def step(self, step: scenarios.Step) -> scenarios.Step:
        """See ``FaultHooks``."""
        return step

    def force_delete(self, step: scenarios.Step) -> ids.WorkerId | None:
        """See ``FaultHooks``."""
        raise AssertionError(step.action)

    def partitioned(self, pod: Pod) -> None:
        """See ``FaultHooks``."""

    def orphan(self, name: ids.WorkerId, token: int) -> Pod | None:
        """See ``FaultHooks``."""
        return None

    def process_ends(self, pod: Pod) -> bool:
        """See ``FaultHooks``."""
        return False

    def batch(self, pod: Pod, actions: list[sdk_session.Action]) -> None:
        """See ``FaultHooks``."""

    def outgoing_report(self, pod: Pod, member: model.Member) -> model.Member:
        """See ``FaultHooks``."""
        return member

    def report(self, name: ids.WorkerId, token: int) -> bool:
        """See ``FaultHooks``."""
        return True

    def departing(self, name: ids.WorkerId) -> None:
        """See ``FaultHooks``."""

    def declare(self, pod: Pod) -> bool:
        """See ``FaultHooks``."""
        return False

    def inputs(self, inputs: control.Inputs) -> control.Inputs:
        """See ``FaultHooks``."""
        return inputs

    def api_unreachable(self) -> bool:
        """See ``FaultHooks``."""
        return False

    def after_round(self, epoch: int) -> None:
        """See ``FaultHooks``."""

    def stalls(self, decided: control.Step, plan: model.Plan,
               writes: tuple[control.Write, ...]) -> bool:
        """See ``FaultHooks``."""
        return False

    def lands(self, write: control.Write) -> bool:
        """See ``FaultHooks``."""
        return True

    def new_term(self) -> bool:
        """See ``FaultHooks``."""
        return True

    def order(self, writes: tuple[control.Write, ...]) -> tuple[control.Write, ...]:
        """See ``FaultHooks``."""
        return writes

    def crash_prefix(self, count: int) -> int | None:
        """See ``FaultHooks``."""
        return None

    def document(self, message: messages.Assignment) -> messages.Assignment:
        """See ``FaultHooks``."""
        return message
