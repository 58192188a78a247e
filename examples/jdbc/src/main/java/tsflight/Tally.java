package tsflight;

/**
 * The PASS and FAIL lines of a check program and its closing {@code N passed, M failed} line, shared
 * by {@link JdbcCheck} and {@link JdbcAuthCheck}.
 */
final class Tally {
  int passed;
  int failed;

  void pass(String name) {
    passed++;
    System.out.println("PASS " + name);
  }

  void fail(String name, String reason) {
    failed++;
    System.out.println("FAIL " + name + ": " + oneLine(reason));
  }

  /** Prints the closing count; returns the exit code: 0 only when nothing failed, else 1. */
  int summary() {
    System.out.println(passed + " passed, " + failed + " failed");
    return failed == 0 ? 0 : 1;
  }

  /** s on one line (white space folded), at most 600 characters and "...". */
  static String oneLine(String s) {
    if (s == null) {
      return "(no message)";
    }
    s = s.replaceAll("\\s+", " ").trim();
    return s.length() > 600 ? s.substring(0, 600) + "..." : s;
  }
}
