#!/usr/bin/env python3
"""Drives the interactive `swarmrt ctl` through a pseudo-terminal, as a user at a keyboard would.

usage: console_pty.py SWARMRT HOST:PORT SECRET_FILE (live|gone COORDINATOR_PID)
  live: tab completion of an actor name, help, an unknown command, watch stopped by a key, quit
  gone: the coordinator is killed while the console is open; the next command says so and the
        console exits non-zero
Standard library only (pty), bounded in time; exits non-zero with the reason on failure.
"""
import os
import pty
import select
import signal
import sys
import time


class Console:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.out = b""

    def send(self, text):
        os.write(self.fd, text.encode())

    def expect(self, what, timeout=30):
        """Reads until `what` appears after what was matched before; returns the text before it."""
        deadline = time.time() + timeout
        while what.encode() not in self.out:
            left = deadline - time.time()
            if left <= 0:
                fail(f"no {what!r} within {timeout} s; the console showed:\n"
                     + self.out.decode(errors="replace")[-3000:])
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    fail(f"the console ended before {what!r}:\n" + self.out.decode(errors="replace"))
                self.out += chunk
        before, _, self.out = self.out.partition(what.encode())
        return before.decode(errors="replace")

    def wait(self, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:  # keep the pty drained so the console never blocks on a write
                if select.select([self.fd], [], [], 0.1)[0]:
                    os.read(self.fd, 65536)
            except OSError:
                pass
        os.kill(self.pid, signal.SIGKILL)
        fail(f"the console did not exit within {timeout} s")


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


def main():
    swarmrt, target, secret, mode = sys.argv[1:5]
    c = Console([swarmrt, "ctl", target, "--secret-file", secret])
    try:
        c.expect("swarmrt> ")
        if mode == "live":
            # Tab completes a command, then an actor name.
            c.send("inf\t")
            c.expect("info ")
            c.send("stage0/dil\t")
            c.expect("stage0/diloco")
            c.send("\r")
            shown = c.expect("swarmrt> ")
            if "round:" not in shown:
                fail("info stage0/diloco showed no round:\n" + shown)
            c.send("help\r")
            shown = c.expect("swarmrt> ")
            for cmd in ("kill PATTERN", "trace NAME", "watch [SECONDS]", "quit"):
                if cmd not in shown:
                    fail(f"help does not list {cmd!r}:\n{shown}")
            c.send("frobnicate now\r")
            shown = c.expect("swarmrt> ")
            if "unknown command 'frobnicate'" not in shown:
                fail("an unknown command got no clear error:\n" + shown)
            c.send("watch 0.2\r")
            c.expect("tokens/s")
            c.expect("(any key stops)")
            c.send("x")
            c.expect("swarmrt> ")
            c.send("quit\r")
            code = c.wait()
            if code != 0:
                fail(f"quit exited with {code}")
            print("ok: completion, help, unknown command, watch stopped by a key, quit")
        else:
            os.kill(int(sys.argv[5]), signal.SIGKILL)
            time.sleep(1)
            c.send("nodes\r")
            shown = c.expect("is gone", timeout=60)
            code = c.wait(timeout=60)
            if code == 0:
                fail("the console exited 0 after its coordinator went away")
            print(f"ok: the console said its coordinator is gone and exited {code}")
    finally:
        try:
            os.kill(c.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    main()
