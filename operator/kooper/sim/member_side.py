"""The member side of the simulator: each pod's worker, as ``sdk.session`` behaves.

A member applies its newest document after the propagation latency: stop what was
revoked (one batch taking the stop time), start what was assigned (the start time),
then report (the report latency). It is modelled here rather than driven through
``sdk.Session`` so that 1,000 pods x 100,000 tasks stay affordable; the rules are the
session's (newest generation only, stops before starts, report after both, self-fence
after the lease duration). With ``Config.sessions`` the real session drives it instead
(``_pump``, ``_batch``). Also
here: departures (a crash, a graceful leave), and partitions from the API (the member
fences itself after the lease, the operator declares it departed, it heals).
"""

from __future__ import annotations

from kooper.core import events as ev
from kooper.core import ids, model
from kooper.protocol import messages
from kooper.sdk import session as sdk_session
from kooper.sim.pod import Pod
from kooper.sim.world import World


class MemberSide(World):
    """The pods' processes: the clock events they handle and the reports they send."""

    def _up(self, name: ids.WorkerId, token: int) -> None:
        pod = self.pods.get(name)
        if pod is None or pod.token != token:
            return
        pod.alive = True
        self.emit(ev.Kind.JOIN, name)
        if self.config.sessions:
            pod.session = sdk_session.Session(
                member_name=name, incarnation=pod.incarnation, protocols=pod.protocols,
                lease_duration_ms=self.lat.lease_ms, stop_timeout_ms=self.lat.stop_timeout_ms,
                fence_margin_ms=self.lat.fence_margin_ms)
            pod.session.join(self.clock.now_ms)
            self._pump(pod)
        else:
            self._send_report(pod)
        self.clock.after(self.lat.ready.draw(self.rng), "ready", name, token)

    def _depart(self, pod: Pod, *, graceful: bool = False) -> None:
        """The process is gone: everything it ran stops at once.

        ``graceful`` is a kubelet-driven stop (a rolling restart): the pod gets a
        ``deletionTimestamp`` first, the worker leaves (``Worker.leave``: stops
        everything, deletes its Lease), then the kubelet removes the pod. Otherwise
        (a crash, a kill) the pod and its Lease just vanish.
        """
        if graceful:
            self.modelled.terminating(pod.name)
            self.trigger_round()
        late = self.stop_all(pod)
        pod.alive = False
        self.emit(ev.Kind.LEAVE, pod.name, late_ms=late)
        self.clock.after(self.lat.report.draw(self.rng), "left" if graceful else "gone",
                         pod.name, pod.incarnation)

    def stop_all(self, pod: Pod) -> int:
        """``pod``'s process stops everything it runs at once (it died, it fenced itself);
        returns how late (ms) the stops were recorded."""
        # A start that completed this very millisecond is recorded 1 ms before its stop:
        # the event log orders stops before starts within a millisecond.
        late = 1 if pod.started_at == self.clock.now_ms else 0
        for resource in sorted(pod.running):
            self.emit(ev.Kind.STOP, pod.name, resource, pod.generation, late_ms=late)
            if self.owner.get(resource) == pod.name:
                del self.owner[resource]
        pod.running.clear()
        return late

    def _doc(self, name: ids.WorkerId, token: int, doc: messages.Assignment) -> None:
        pod = self.live_pod(name, token)
        if pod is None or pod.partitioned:
            return
        if pod.session is not None:
            # The document names the incarnation it was planned for; the session
            # itself ignores one meant for a previous life of this pod.
            pod.session.receive_assignment(doc)
            self._pump(pod)
            return
        if doc.incarnation and doc.incarnation != pod.incarnation:
            return  # a document planned for a previous life of this pod is not ours
        newest = pod.latest.generation if pod.latest is not None else -1
        if doc.generation <= max(newest, pod.generation):
            return
        pod.latest = doc
        if not pod.busy:
            self._apply(pod)

    def _apply(self, pod: Pod) -> None:
        doc = pod.latest
        assert doc is not None
        pod.busy = True
        to_stop = pod.running.difference(doc.assigned.connectors, doc.assigned.tasks)
        if to_stop:
            self.clock.after(self.lat.stop.draw(self.rng), "stopped", pod.name, pod.token, doc,
                             to_stop)
        else:
            self._start_phase(pod, doc)

    def _stopped(self, name: ids.WorkerId, token: int, doc: messages.Assignment,
                 to_stop: set[str]) -> None:
        pod = self.live_pod(name, token)
        if pod is None or pod.fenced:
            return
        for resource in sorted(to_stop & pod.running):
            self.emit(ev.Kind.STOP, name, resource, doc.generation)
            if self.owner.get(resource) == name:
                del self.owner[resource]
        pod.running -= to_stop
        self._start_phase(pod, doc)

    def _start_phase(self, pod: Pod, doc: messages.Assignment) -> None:
        to_start = set(doc.assigned.connectors).union(doc.assigned.tasks) - pod.running
        if to_start:
            self.clock.after(self.lat.start.draw(self.rng), "started", pod.name, pod.token, doc,
                             to_start)
        else:
            self._applied(pod, doc)

    def _started(self, name: ids.WorkerId, token: int, doc: messages.Assignment,
                 to_start: set[str]) -> None:
        pod = self.live_pod(name, token)
        if pod is None or pod.fenced:
            return
        epochs = self.memory.persisted.state.epochs
        for resource in sorted(to_start):
            holder = self.owner.get(resource)
            if holder is not None and holder != name:
                self.violations.append(
                    f"t={self.clock.now_ms}: {resource} started on {name} while {holder} runs it")
            self.owner[resource] = name
            self.emit(ev.Kind.START, name, resource, doc.generation, epochs.get(resource, -1))
        pod.running |= to_start
        pod.started_at = self.clock.now_ms
        self._applied(pod, doc)

    def _applied(self, pod: Pod, doc: messages.Assignment) -> None:
        pod.generation = doc.generation
        pod.busy = False
        self._send_report(pod)
        if pod.latest is not None and pod.latest.generation > pod.generation:
            self._apply(pod)

    # -- members driven by the real SDK session ------------------------------------------------

    def _pump(self, pod: Pod) -> None:
        """Run the session's next batches: reports at once, stops/starts after their time."""
        session = pod.session
        assert session is not None
        if pod.busy:
            return
        while actions := session.next_actions():
            first = actions[0]
            if isinstance(first, sdk_session.Stop | sdk_session.Start):
                pod.busy = True
                span = self.lat.stop if isinstance(first, sdk_session.Stop) else self.lat.start
                self.clock.after(span.draw(self.rng), "batch", pod.name, pod.token, actions)
                return
            for action in actions:
                if isinstance(action, sdk_session.WriteReport):
                    if pod.partitioned:
                        session.done(action, error="the API is unreachable")
                        return  # retried after lease_renewed
                    report = action.report
                    self._send_report(pod, model.Member(
                        pod.name, report.owned, report.generation, report.protocols,
                        report.incarnation, fenced=report.fenced, rejoins=report.rejoins),
                        report.member_epoch)
                session.done(action)

    def _batch(self, name: ids.WorkerId, token: int, actions: list[sdk_session.Action]) -> None:
        pod = self.live_pod(name, token)
        if pod is None or pod.session is None:
            return
        self.hooks.batch(pod, actions)
        for action in actions:
            if isinstance(action, sdk_session.Stop):
                self.emit(ev.Kind.STOP, name, action.resource, action.generation)
                if self.owner.get(action.resource) == name:
                    del self.owner[action.resource]
                pod.running.discard(action.resource)
            elif isinstance(action, sdk_session.Start):
                holder = self.owner.get(action.resource)
                if holder is not None and holder != name:
                    self.violations.append(f"t={self.clock.now_ms}: {action.resource} started "
                                           f"on {name} while {holder} runs it")
                self.owner[action.resource] = name
                self.emit(ev.Kind.START, name, action.resource, action.generation,
                          action.epoch)  # the epoch its document gave it
                pod.running.add(action.resource)
                pod.started_at = self.clock.now_ms
            pod.session.done(action)
        pod.generation = pod.session.applied_generation
        pod.busy = False
        self._pump(pod)

    def _send_report(self, pod: Pod, member: model.Member | None = None,
                     member_epoch: int = 0) -> None:
        if pod.partitioned:
            return
        if member is not None:
            member = self.hooks.outgoing_report(pod, member)
        pod.report_seq += 1
        if member is None:
            running = pod.running
            owned = model.ConnectorsAndTasks(
                frozenset(r for r in running if r in self.configured.connectors),
                frozenset(r for r in running if r not in self.configured.connectors),
            )
            member = model.Member(pod.name, owned, pod.generation, pod.protocols,
                                  pod.incarnation)
        delay = self.lat.report.draw(self.rng)
        faults = self.config.faults
        if self.clock.now_ms < faults.until_ms:
            roll = self.rng.random()
            if roll < faults.lose_report:
                delay += self.lat.resync_ms  # lost; the next Lease renewal carries it
            elif roll < faults.lose_report + faults.slow_report:
                delay += faults.slow_report_ms
        self.clock.after(delay, "report", pod.name, pod.token, pod.report_seq, member,
                         member_epoch)

    def _report(self, name: ids.WorkerId, token: int, seq: int, member: model.Member,
                member_epoch: int) -> None:
        if not self.hooks.report(name, token):
            return
        pod = self.live_pod(name, token)
        if pod is None:
            return  # (a report written before a partition still lands)
        if self.seen_seq.get(name, (0, 0)) >= (token, seq):
            return  # an older report arriving late: the Lease already holds a newer one
        self.seen_seq[name] = (token, seq)
        self.visible[name] = member
        self.modelled.update(member, member_epoch)
        self.visible_epochs[name] = member_epoch
        self.trigger_round()

    def _gone(self, name: ids.WorkerId, incarnation: str) -> None:
        self.hooks.departing(name)
        seen = self.visible.get(name)
        if seen is not None and seen.incarnation == incarnation:
            del self.visible[name]
            self.visible_epochs.pop(name, None)
            self.modelled.remove(name)
            self.trigger_round()

    def _left(self, name: ids.WorkerId, incarnation: str) -> None:
        """A graceful leave: the Lease is deleted; the kubelet removes the pod after."""
        self.hooks.departing(name)
        seen = self.visible.get(name)
        if seen is not None and seen.incarnation == incarnation:
            del self.visible[name]
            self.modelled.leave(name)
            self.trigger_round()
        self.clock.after(self.lat.pod_removal.draw(self.rng), "pod_gone", name,
                         f"{name}/{incarnation}")

    def _pod_gone(self, name: ids.WorkerId, uid: str) -> None:
        self.modelled.pod_gone(name, uid)
        self.trigger_round()
        if self.roller is not None:
            self.roller.gone(name)

    # -- partitions ---------------------------------------------------------------------------

    def _cut(self, name: ids.WorkerId, token: int, cut: int) -> Pod | None:
        pod = self.live_pod(name, token)
        return pod if pod is not None and pod.partitioned and pod.partitions == cut else None

    def _fence(self, name: ids.WorkerId, token: int, cut: int) -> None:
        pod = self._cut(name, token, cut)
        if pod is not None and pod.session is not None:
            pod.session.tick(self.clock.now_ms)  # the session fences itself
            pod.fenced = True
            self._pump(pod)
        elif pod is not None and not pod.fenced:
            pod.fenced = True
            self.stop_all(pod)

    def _exiting(self, name: ids.WorkerId, token: int, cut: int) -> Pod | None:
        """The pod whose session's deadline has come with a stop still running (its process
        ends), else None (a session that needs nothing more is pumped instead)."""
        pod = self._cut(name, token, cut)
        if pod is None or pod.session is None:
            return None
        pod.session.tick(self.clock.now_ms)
        if pod.session.exit_reason is None:
            self._pump(pod)
            return None
        return pod

    def _exit_check(self, name: ids.WorkerId, token: int, cut: int) -> None:
        """The session's deadline: a stop still running ends the process (it restarts)."""
        pod = self._exiting(name, token, cut)
        if pod is None or self.hooks.process_ends(pod):
            return
        protocols = pod.protocols
        self._depart(pod)
        self.spawn(pod.ordinal, protocols, self.lat.restart.draw(self.rng), name=pod.name)

    def _declare(self, name: ids.WorkerId, token: int, cut: int) -> None:
        pod = self._cut(name, token, cut)
        if pod is not None and not self.hooks.declare(pod):
            self._gone(name, pod.incarnation)

    def _heal(self, name: ids.WorkerId, token: int, cut: int) -> None:
        pod = self._cut(name, token, cut)
        if pod is None:
            return
        if pod.session is not None:
            # The session rejoins by itself once its Lease is renewed.
            pod.partitioned = False
            pod.fenced = False
            pod.session.lease_renewed(self.clock.now_ms)
            # The renewal writes the Lease, and the Lease carries the session's report.
            report = pod.session.report()
            self._send_report(pod, model.Member(
                pod.name, report.owned, report.generation, report.protocols,
                report.incarnation, fenced=report.fenced, rejoins=report.rejoins),
                report.member_epoch)
            self._pump(pod)
            self._reread(name, token)
            return
        if pod.fenced:
            # Fenced: the process restarts its membership as a new incarnation.
            self.emit(ev.Kind.LEAVE, name)  # its stops were recorded at the fence
            pod.alive = False
            self.spawn(pod.ordinal, pod.protocols, 0, name=pod.name)
            return
        pod.partitioned = False
        self._send_report(pod)
        self._reread(name, token)

    def _reread(self, name: ids.WorkerId, token: int) -> None:
        written = self.written.get(name)
        if written is not None:
            self._doc(name, token, written)
