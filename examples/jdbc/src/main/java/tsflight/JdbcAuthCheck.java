package tsflight;

import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Base64;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import tsflight.Tally.Body;
import tsflight.Tally.CheckFailed;

/**
 * Checks tsflight's tokens and TLS through the Apache Arrow Flight SQL JDBC driver.
 *
 * <pre>
 *   JdbcAuthCheck HOST:PORT CA_PEM TABLE EXPECTED_COUNT [MTLS_HOST:PORT CLIENT_CERT CLIENT_KEY]
 * </pre>
 *
 * <p>HOST:PORT is a server with {@code --tls-cert}/{@code --tls-key} signed by the CA in CA_PEM and
 * {@code --auth-tokens}; TABLE holds EXPECTED_COUNT rows. The tokens come from the environment, so
 * that they appear on no command line: TSFLIGHT_READ_TOKEN, TSFLIGHT_WRITE_TOKEN (scopes read and
 * write) and TSFLIGHT_EXPIRED_TOKEN (a line whose expiry has passed). With the last three arguments
 * it also connects to a mutual-TLS server (its {@code --tls-client-ca} trusts CLIENT_CERT, and the
 * read token is valid there).
 *
 * <p>Secrets travel as connection {@link Properties}, never in the URL, and no message printed
 * contains one. Prints {@code PASS name} or {@code FAIL name: reason} per check, then {@code N
 * passed, M failed}; exits 0 only when nothing failed (1 otherwise, 2 on bad usage).
 */
public final class JdbcAuthCheck {
  /** Upper bound for any one check, so that a hung server cannot hang the caller. */
  private static final long CHECK_TIMEOUT_SECONDS = 60;

  /**
   * The driver logs every refused handshake as SEVERE with a stack trace; refusals are what half
   * of these checks expect, and each prints its own one-line reason. Held here because
   * java.util.logging keeps loggers only weakly.
   */
  private static final java.util.logging.Logger HANDSHAKE_LOG =
      java.util.logging.Logger.getLogger(
          "org.apache.arrow.driver.jdbc.shaded.org.apache.arrow.flight.auth2.ClientHandshakeWrapper");

  private final String hostPort;
  private final String caPem;
  private final String table;
  private final long expectedCount;
  private final String readToken;
  private final String writeToken;
  private final String expiredToken;
  private final String mtlsHostPort;
  private final String clientCert;
  private final String clientKey;

  private final ExecutorService executor =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "jdbc-auth-check");
            t.setDaemon(true);
            return t;
          });
  private final Tally tally = new Tally();

  private JdbcAuthCheck(String[] args, String read, String write, String expired) {
    hostPort = args[0];
    caPem = args[1];
    table = args[2];
    expectedCount = Long.parseLong(args[3]);
    readToken = read;
    writeToken = write;
    expiredToken = expired;
    mtlsHostPort = args.length == 7 ? args[4] : null;
    clientCert = args.length == 7 ? args[5] : null;
    clientKey = args.length == 7 ? args[6] : null;
  }

  public static void main(String[] args) {
    String usage =
        "usage: JdbcAuthCheck HOST:PORT CA_PEM TABLE EXPECTED_COUNT [MTLS_HOST:PORT CLIENT_CERT"
            + " CLIENT_KEY]\n(tokens from TSFLIGHT_READ_TOKEN, TSFLIGHT_WRITE_TOKEN, TSFLIGHT_EXPIRED_TOKEN)";
    if ((args.length != 4 && args.length != 7) || args[0].startsWith("-")) {
      System.err.println(usage);
      System.exit(2);
    }
    String read = System.getenv("TSFLIGHT_READ_TOKEN");
    String write = System.getenv("TSFLIGHT_WRITE_TOKEN");
    String expired = System.getenv("TSFLIGHT_EXPIRED_TOKEN");
    if (isEmpty(read) || isEmpty(write) || isEmpty(expired)) {
      System.err.println("JdbcAuthCheck: set TSFLIGHT_READ_TOKEN, TSFLIGHT_WRITE_TOKEN and TSFLIGHT_EXPIRED_TOKEN");
      System.err.println(usage);
      System.exit(2);
    }
    try {
      Long.parseLong(args[3]);
    } catch (NumberFormatException e) {
      System.err.println("JdbcAuthCheck: EXPECTED_COUNT must be an integer, got " + args[3]);
      System.exit(2);
    }
    // The driver's shaded Arrow logs INFO lines through java.util.logging on start-up.
    java.util.logging.Logger.getLogger("").setLevel(java.util.logging.Level.WARNING);
    HANDSHAKE_LOG.setLevel(java.util.logging.Level.OFF);
    JdbcAuthCheck c = new JdbcAuthCheck(args, read, write, expired);
    int rc;
    try {
      rc = c.runAll();
    } catch (Throwable t) { // never expected; keep the summary line anyway
      c.tally.fail("internal", describe(t));
      rc = c.tally.summary();
    }
    System.out.flush();
    // Threads of a timed-out check or of the driver must not keep the JVM alive.
    System.exit(rc);
  }

  private int runAll() {
    System.out.println(
        "tsflight JDBC auth check: "
            + tlsUrl(hostPort)
            + " table "
            + table
            + " expecting "
            + expectedCount
            + " rows"
            + (mtlsHostPort == null ? "" : "; mutual TLS at " + mtlsHostPort));
    String count = "SELECT count(*) FROM " + table;

    // Tokens that work: a Basic handshake (user and password, any user name), and the token
    // sent as a Bearer header (token=). Both scopes may read.
    check("user-password", () -> expectCount(tlsUrl(hostPort), basic(readToken), count));
    check("token", () -> expectCount(tlsUrl(hostPort), bearer(readToken), count));
    check("write-token", () -> expectCount(tlsUrl(hostPort), bearer(writeToken), count));

    // Refusals. The driver connects lazily, so each runs a query to get its answer.
    check(
        "no-credentials",
        () -> expectRefused(tlsUrl(hostPort), new Properties(), "authentication required"));
    check("wrong-token", () -> expectRefused(tlsUrl(hostPort), bearer(randomToken()), "unknown token"));
    check(
        "wrong-password",
        () -> expectRefused(tlsUrl(hostPort), basic(randomToken()), "unknown token"));
    check("expired-token", () -> expectRefused(tlsUrl(hostPort), bearer(expiredToken), "expired"));

    // TLS is verified: without the CA (the JVM's trust store only) or in plaintext, no query
    // gets through even with a good token; the connection fails (UNAVAILABLE), not the token.
    check(
        "tls-untrusted",
        () ->
            expectRefused(
                "jdbc:arrow-flight-sql://" + hostPort + "?useEncryption=true",
                bearer(readToken),
                "UNAVAILABLE"));
    check(
        "plaintext-refused",
        () ->
            expectRefused(
                "jdbc:arrow-flight-sql://" + hostPort + "?useEncryption=false",
                bearer(readToken),
                "UNAVAILABLE"));

    // The read token cannot write. SQL over Flight SQL is read-only for every token, so an INSERT
    // fails either way; this shows that the refusal reaches the JDBC caller as an SQLException.
    check(
        "read-token-insert",
        () -> {
          try (Connection conn = DriverManager.getConnection(tlsUrl(hostPort), bearer(readToken));
              Statement st = conn.createStatement()) {
            expectSqlException(() -> st.executeUpdate("INSERT INTO " + table + " SELECT * FROM " + table + " LIMIT 1"));
            expectSqlException(
                () -> {
                  try (PreparedStatement ps =
                      conn.prepareStatement("DELETE FROM " + table + " WHERE 1 = 0")) {
                    ps.executeUpdate();
                  }
                });
            long n = queryLong(conn, count);
            if (n != expectedCount) {
              throw new CheckFailed("count(*) after the refused writes = " + n + ", want " + expectedCount);
            }
          }
        });

    if (mtlsHostPort != null) {
      String mtls =
          tlsUrl(mtlsHostPort)
              + "&clientCertificate="
              + clientCert
              + "&clientKey="
              + clientKey;
      check(
          "mtls-client-certificate",
          () -> {
            try (Connection conn = DriverManager.getConnection(mtls, basic(readToken))) {
              long one = queryLong(conn, "SELECT 1");
              if (one != 1) {
                throw new CheckFailed("SELECT 1 returned " + one);
              }
            }
          });
      check(
          "mtls-without-certificate",
          () -> expectRefused(tlsUrl(mtlsHostPort), basic(readToken), "UNAVAILABLE"));
    }
    return tally.summary();
  }

  /** The URL of a TLS connection that trusts the test CA (no secrets in it). */
  private String tlsUrl(String hp) {
    return "jdbc:arrow-flight-sql://" + hp + "?useEncryption=true&tlsRootCerts=" + caPem;
  }

  private static Properties basic(String secret) {
    Properties p = new Properties();
    p.setProperty("user", "any-user");
    p.setProperty("password", secret);
    return p;
  }

  private static Properties bearer(String secret) {
    Properties p = new Properties();
    p.setProperty("token", secret);
    return p;
  }

  /** A well-formed token the server has never seen. */
  private static String randomToken() {
    byte[] b = new byte[32];
    new SecureRandom().nextBytes(b);
    return "tsf_" + Base64.getUrlEncoder().withoutPadding().encodeToString(b);
  }

  private void expectCount(String url, Properties props, String sql) throws Exception {
    try (Connection conn = DriverManager.getConnection(url, props)) {
      long n = queryLong(conn, sql);
      if (n != expectedCount) {
        throw new CheckFailed(sql + " = " + n + ", want " + expectedCount);
      }
      System.out.println("  " + sql + " = " + n);
    }
  }

  /**
   * Connecting and running SELECT 1 must fail with an SQLException; with want, its message (and
   * its causes') must contain want.
   */
  private void expectRefused(String url, Properties props, String want) throws Exception {
    String msg;
    try (Connection conn = DriverManager.getConnection(url, props)) {
      long one = queryLong(conn, "SELECT 1");
      throw new CheckFailed("SELECT 1 returned " + one + ", but the connection should be refused");
    } catch (SQLException e) {
      msg = describe(e);
    }
    if (want != null && !msg.toLowerCase().contains(want.toLowerCase())) {
      throw new CheckFailed("refused, but the error does not mention \"" + want + "\": " + Tally.oneLine(msg));
    }
    System.out.println("  refused: " + shorten(msg));
  }

  private static void expectSqlException(Body body) throws Exception {
    try {
      body.run();
    } catch (SQLException e) {
      System.out.println("  refused: " + shorten(describe(e)));
      return;
    }
    throw new CheckFailed("the statement succeeded, but it should have failed");
  }

  private static long queryLong(Connection conn, String sql) throws Exception {
    try (Statement st = conn.createStatement();
        ResultSet rs = st.executeQuery(sql)) {
      if (!rs.next()) {
        throw new CheckFailed(sql + " returned no row");
      }
      long v = rs.getLong(1);
      if (rs.wasNull()) {
        throw new CheckFailed(sql + " returned NULL");
      }
      return v;
    }
  }

  /** Runs one check with a time limit and prints its PASS or FAIL line. */
  private void check(String name, Body body) {
    tally.check(executor, CHECK_TIMEOUT_SECONDS, name, body, JdbcAuthCheck::describe);
  }

  private static boolean isEmpty(String s) {
    return s == null || s.isEmpty();
  }

  /** An exception and its causes as one line, without stack traces. */
  private static String describe(Throwable t) {
    StringBuilder sb = new StringBuilder();
    for (int depth = 0; t != null && depth < 8; t = t.getCause(), depth++) {
      String msg = t.getMessage();
      if (depth > 0 && msg != null && sb.indexOf(msg) >= 0) {
        continue; // wrappers often repeat their cause's message
      }
      if (sb.length() > 0) {
        sb.append(" <- ");
      }
      sb.append(t.getClass().getSimpleName());
      if (msg != null) {
        sb.append(": ").append(msg);
      }
    }
    return sb.toString();
  }

  private static String shorten(String s) {
    s = Tally.oneLine(s);
    return s.length() > 240 ? s.substring(0, 240) + "..." : s;
  }
}
