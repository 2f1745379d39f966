"""One refreshing source of credentials: a 401 logs in again once, never in a loop;
expiring tokens are renewed first; a token file is re-read."""

from __future__ import annotations

import pytest

from kooper.sdk import apierrors
from kooper.sdk.connection import Connection
from kooper.shell.login import Login


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def counting(tokens: list[str], **extra):
    calls: list[int] = []

    def load() -> Connection:
        calls.append(1)
        return Connection(server="https://api", token=tokens[min(len(calls), len(tokens)) - 1],
                          **extra)
    return load, calls


def test_a_401_logs_in_again_once_for_every_request_sent_with_the_stale_token():
    clock = Clock()
    load, calls = counting(["old", "new"])
    login = Login(load, clock=clock, wall=clock)
    stale, header = login.current()
    assert header == "Bearer old"
    clock.now += 5
    assert login.rejected(stale)          # the first 401: a new login
    assert login.rejected(stale)          # the others in flight: already renewed
    assert login.current()[1] == "Bearer new"
    assert (len(calls), login.logins) == (2, 2)


def test_a_token_the_server_keeps_rejecting_fails_requests_without_a_login_loop():
    clock = Clock()
    load, calls = counting(["bad"])
    login = Login(load, clock=clock, wall=clock, min_interval_s=1.0)
    clock.now += 5
    for _ in range(50):                   # a burst of 401s within the interval
        login.rejected(login.connection)
    assert len(calls) == 2
    clock.now += 5
    login.rejected(login.connection)
    assert len(calls) == 3


def test_a_failed_login_keeps_the_old_credentials():
    clock = Clock()
    answers = iter([Connection(server="https://api", token="t")])

    def load() -> Connection:
        try:
            return next(answers)
        except StopIteration:
            raise RuntimeError("the exec plugin failed") from None

    login = Login(load, clock=clock, wall=clock)
    clock.now += 5
    assert login.rejected(login.connection) is False
    assert login.current()[1] == "Bearer t"


def test_an_expiring_token_is_renewed_before_it_is_sent():
    clock = Clock()
    load, calls = counting(["first", "second"], expires_at=1100.0)
    login = Login(load, clock=clock, wall=clock)
    clock.now = 1050.0
    assert login.current()[1] == "Bearer first"
    clock.now = 1080.0                    # within 30 s of the expiry
    assert login.current()[1] == "Bearer second"
    assert len(calls) == 2


def _token_file_login(tmp_path, text):
    """A login reading its token from a file first holding ``text`` (``Bearer one``)."""
    clock = Clock()
    token = tmp_path / "token"
    token.write_text(text)
    login = Login.static(Connection(server="https://api", token_file=str(token)), clock=clock)
    assert login.current()[1] == "Bearer one"
    return clock, token, login


def test_a_token_file_is_reread_every_minute_and_after_a_401(tmp_path):
    clock, token, login = _token_file_login(tmp_path, "one")
    token.write_text("two")
    assert login.current()[1] == "Bearer one"
    clock.now += 61
    assert login.current()[1] == "Bearer two"
    token.write_text("three")
    clock.now += 5
    assert login.rejected(login.connection)
    assert login.current()[1] == "Bearer three"


def test_a_token_file_gone_or_empty_keeps_the_token_read_before(tmp_path):
    """client-go's caching token source keeps the token it has when the file cannot be
    read again ("Unable to rotate token"); kooper sent ``Bearer `` (an empty file, a
    writer that truncates before it writes) or failed the request (a file being
    replaced)."""
    clock, token, login = _token_file_login(tmp_path, "one\n")
    token.write_text("  \n")
    clock.now += 61
    assert login.current()[1] == "Bearer one"
    token.unlink()
    clock.now += 61
    assert login.current()[1] == "Bearer one"
    token.write_text("two")
    assert login.current()[1] == "Bearer one"  # read again a period later
    clock.now += 61
    assert login.current()[1] == "Bearer two"


def test_a_token_file_empty_from_the_start_fails_the_request_naming_it(tmp_path):
    token = tmp_path / "token"
    token.write_text("\n")
    login = Login.static(Connection(server="https://api", token_file=str(token)))
    with pytest.raises(apierrors.Unreachable, match="empty"):
        login.current()


@pytest.mark.parametrize("header", [None])
def test_no_token_sends_no_authorization(header):
    login = Login.static(Connection(server="http://127.0.0.1:1"))
    assert login.current()[1] is header
