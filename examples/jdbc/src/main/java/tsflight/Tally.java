package tsflight;

import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * The PASS and FAIL lines of a check program and its closing {@code N passed, M failed} line, shared
 * by {@link JdbcCheck} and {@link JdbcAuthCheck}.
 */
final class Tally {
  int passed;
  int failed;

  /** A check's body: returns normally to pass, throws to fail. */
  interface Body {
    void run() throws Exception;
  }

  /** Thrown by a check body to fail with a plain reason. */
  static final class CheckFailed extends Exception {
    CheckFailed(String reason) {
      super(reason);
    }
  }

  /** How a check ended. */
  enum Outcome {
    PASSED,
    FAILED,
    TIMED_OUT
  }

  /**
   * Runs one check on executor, waiting at most timeoutSeconds, and prints its PASS or FAIL line.
   * A failure's reason is a {@link CheckFailed}'s message, or else describe of what body threw.
   * On a timeout the check's thread is interrupted and left behind.
   */
  Outcome check(
      ExecutorService executor,
      long timeoutSeconds,
      String name,
      Body body,
      Function<Throwable, String> describe) {
    Future<?> f =
        executor.submit(
            () -> {
              body.run();
              return null;
            });
    try {
      f.get(timeoutSeconds, TimeUnit.SECONDS);
      pass(name);
      return Outcome.PASSED;
    } catch (TimeoutException e) {
      f.cancel(true);
      fail(name, "timed out after " + timeoutSeconds + " s");
      return Outcome.TIMED_OUT;
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      fail(name, cause instanceof CheckFailed ? cause.getMessage() : describe.apply(cause));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      fail(name, "interrupted");
    }
    return Outcome.FAILED;
  }

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
