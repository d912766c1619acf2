"""A child process with SIGINT as a fresh shell gives it, whatever the test process has.

Dispositions set to ignore and blocked masks survive `exec`, and an earlier
test in the same pytest worker may have left either (a server's or a chat's
Ctrl-C handling): a child started from there would never see Ctrl-C. Pass
`default_sigint` as `subprocess.Popen(..., preexec_fn=default_sigint)` to a
child that a test interrupts.
"""

import signal


def default_sigint():
    """In a child before exec: SIGINT at its default, unblocked."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
