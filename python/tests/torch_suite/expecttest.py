"""A stand-in for the `expecttest` package, which torch's test utilities import and Debian 12
does not ship: only what torch.testing._internal.common_utils reads of it (ACCEPT, TestCase,
assertExpectedInline), for run_suite.py. Not installed; not a general replacement."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (expecttest's name)
        self.assertEqual(str(actual).strip(), str(expect).strip())
