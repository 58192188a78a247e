package tsflight;

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ParameterMetaData;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Calendar;
import java.util.List;
import java.util.Locale;
import java.util.TimeZone;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import tsflight.Tally.Body;
import tsflight.Tally.CheckFailed;

/**
 * Checks tsflight's Flight SQL endpoint through the Apache Arrow Flight SQL JDBC driver.
 *
 * <pre>
 *   JdbcCheck HOST:PORT TABLE [INDEX_COLUMN]
 * </pre>
 *
 * <p>Prints {@code PASS name} or {@code FAIL name: reason} per check, then {@code N passed, M
 * failed}; exits 0 only when nothing failed (1 otherwise, 2 on bad usage). The number of checks is
 * fixed: when the connection cannot be made, the checks after it fail as skipped.
 */
public final class JdbcCheck {
  /** Upper bound for any one check, so that a hung server cannot hang the caller. */
  private static final long CHECK_TIMEOUT_SECONDS = 60;
  /** Closing a result set in the middle of a big stream must take less than this. */
  private static final long CLOSE_TIMEOUT_SECONDS = 10;

  private static final String EXPECTED_CATALOG = "tsflight";
  private static final String EXPECTED_SCHEMA = "main";
  private static final String BIG_QUERY = "SELECT * FROM range(0, 50000000) t(i)";

  private static final Calendar UTC = Calendar.getInstance(TimeZone.getTimeZone("UTC"), Locale.ROOT);

  private final Tally tally = new Tally();
  private ExecutorService executor = newExecutor();

  private final String url;
  private final String table;
  private final String indexColumn;
  private Connection conn;
  private long total = -1;

  private JdbcCheck(String hostPort, String table, String indexColumn) {
    this.url = "jdbc:arrow-flight-sql://" + hostPort + "?useEncryption=false";
    this.table = table;
    this.indexColumn = indexColumn;
  }

  public static void main(String[] args) {
    if (args.length < 2 || args.length > 3 || args[0].startsWith("-")) {
      System.err.println("usage: JdbcCheck HOST:PORT TABLE [INDEX_COLUMN]");
      System.exit(2);
    }
    // The driver's shaded Arrow logs INFO lines through java.util.logging on start-up.
    java.util.logging.Logger.getLogger("").setLevel(java.util.logging.Level.WARNING);
    JdbcCheck c = new JdbcCheck(args[0], args[1], args.length == 3 ? args[2] : "ts");
    int rc;
    try {
      rc = c.runAll();
    } catch (Throwable t) { // never expected; keep the summary line anyway
      System.out.println("FAIL internal: " + describe(t));
      c.tally.failed++;
      rc = c.tally.summary();
    }
    System.out.flush();
    // Threads of a timed-out check or of the driver must not keep the JVM alive.
    System.exit(rc);
  }

  private int runAll() {
    System.out.println("tsflight JDBC check: " + url + " table " + table + " index column " + indexColumn);

    // 1. Connect. The driver opens its gRPC channel lazily, so a first query proves the server
    // is there and speaks Flight SQL.
    boolean connected =
        check(
            "connect",
            () -> {
              conn = DriverManager.getConnection(url);
              long one = queryLong(conn, "SELECT 1");
              if (one != 1) {
                throw new CheckFailed("SELECT 1 returned " + one);
              }
            });

    String[] names = {
      "count",
      "prepared-parameter-count",
      "prepared-past",
      "prepared-future",
      "metadata-catalogs",
      "metadata-schemas",
      "metadata-tables",
      "metadata-columns",
      "metadata-table-types",
      "metadata-keys",
      "close-mid-stream",
      "connection-after-close",
      "read-only",
      "close-connection",
    };
    if (!connected) {
      for (String name : names) {
        tally.fail(name, "skipped: not connected");
      }
      return tally.summary();
    }

    // 2. count(*) through a plain Statement.
    check(
        "count",
        () -> {
          long n = queryLong(conn, "SELECT count(*) FROM " + table);
          if (n <= 0) {
            throw new CheckFailed("count(*) = " + n + ", want a positive count");
          }
          total = n;
          System.out.println("  count(*) = " + n);
        });

    // 3. A prepared statement with one timestamp parameter.
    String paramSql = "SELECT count(*) FROM " + table + " WHERE " + indexColumn + " >= ?";
    check(
        "prepared-parameter-count",
        () -> {
          try (PreparedStatement ps = conn.prepareStatement(paramSql)) {
            ParameterMetaData pmd = ps.getParameterMetaData();
            int n = pmd.getParameterCount();
            if (n != 1) {
              throw new CheckFailed("getParameterCount() = " + n + ", want 1");
            }
            System.out.println("  parameter 1: " + describeParameter(pmd));
          }
        });
    Timestamp past = Timestamp.from(Instant.parse("1970-01-01T00:00:00Z"));
    Timestamp future = Timestamp.from(Instant.parse("2200-01-01T00:00:00Z"));
    check(
        "prepared-past",
        () -> {
          long n = countSince(paramSql, past);
          if (total < 0) {
            throw new CheckFailed("got " + n + " but the total count(*) is unknown (check count failed)");
          }
          if (n != total) {
            throw new CheckFailed(
                indexColumn + " >= 1970-01-01 counted " + n + ", want the total " + total);
          }
        });
    check(
        "prepared-future",
        () -> {
          long n = countSince(paramSql, future);
          if (n != 0) {
            throw new CheckFailed(
                indexColumn
                    + " >= 2200-01-01 counted "
                    + n
                    + ", want 0 (a wrong count here usually means the parameter schema's"
                    + " timestamp unit is not milliseconds: the driver writes epoch milliseconds"
                    + " into whatever timestamp vector the server asks for)");
          }
        });

    // 4. DatabaseMetaData.
    check(
        "metadata-catalogs",
        () -> {
          List<String> cats = column(conn.getMetaData().getCatalogs(), "TABLE_CAT");
          if (cats.size() != 1 || !EXPECTED_CATALOG.equals(cats.get(0))) {
            throw new CheckFailed("getCatalogs() = " + cats + ", want [" + EXPECTED_CATALOG + "]");
          }
        });
    check(
        "metadata-schemas",
        () -> {
          List<String> found = new ArrayList<>();
          boolean ok = false;
          try (ResultSet rs = conn.getMetaData().getSchemas()) {
            while (rs.next()) {
              String schem = rs.getString("TABLE_SCHEM");
              String cat = rs.getString("TABLE_CATALOG");
              found.add(cat + "." + schem);
              ok |= EXPECTED_SCHEMA.equals(schem) && EXPECTED_CATALOG.equals(cat);
            }
          }
          if (!ok) {
            throw new CheckFailed(
                "getSchemas() = " + found + ", want " + EXPECTED_CATALOG + "." + EXPECTED_SCHEMA);
          }
        });
    check(
        "metadata-tables",
        () -> {
          List<String> found = new ArrayList<>();
          boolean ok = false;
          try (ResultSet rs = conn.getMetaData().getTables(null, null, "%", null)) {
            while (rs.next()) {
              String name = rs.getString("TABLE_NAME");
              String type = rs.getString("TABLE_TYPE");
              found.add(
                  rs.getString("TABLE_CAT") + "." + rs.getString("TABLE_SCHEM") + "." + name + " (" + type + ")");
              ok |= table.equals(name) && "TABLE".equals(type);
            }
          }
          if (!ok) {
            throw new CheckFailed(
                "getTables(null, null, \"%\", null) = " + found + ", want " + table + " of type TABLE");
          }
        });
    check(
        "metadata-columns",
        () -> {
          List<String> found = new ArrayList<>();
          boolean ok = false;
          try (ResultSet rs = conn.getMetaData().getColumns(null, null, table, "%")) {
            while (rs.next()) {
              String tname = rs.getString("TABLE_NAME");
              String cname = rs.getString("COLUMN_NAME");
              if (!table.equals(tname)) {
                continue; // TABLE is a LIKE pattern: '_' matches any character
              }
              found.add(cname + " " + rs.getString("TYPE_NAME"));
              ok |= indexColumn.equals(cname);
            }
          }
          System.out.println("  columns of " + table + ": " + found);
          if (!ok) {
            throw new CheckFailed("getColumns lists no column " + indexColumn);
          }
        });
    check(
        "metadata-table-types",
        () -> {
          List<String> types = column(conn.getMetaData().getTableTypes(), "TABLE_TYPE");
          if (!types.contains("TABLE")) {
            throw new CheckFailed("getTableTypes() = " + types + ", want it to contain TABLE");
          }
        });
    check(
        "metadata-keys",
        () -> {
          DatabaseMetaData md = conn.getMetaData();
          int pk = drain(md.getPrimaryKeys(null, null, table));
          int imported = drain(md.getImportedKeys(null, null, table));
          int exported = drain(md.getExportedKeys(null, null, table));
          System.out.println(
              "  primary keys " + pk + " rows, imported keys " + imported + ", exported keys " + exported);
        });

    // 5. Close a result set in the middle of a big stream.
    check(
        "close-mid-stream",
        () -> {
          Statement st = conn.createStatement();
          ResultSet rs;
          try {
            rs = st.executeQuery(BIG_QUERY);
            int rows = 0;
            while (rows < 10 && rs.next()) {
              rs.getLong(1);
              rows++;
            }
            if (rows != 10) {
              rs.close();
              throw new CheckFailed(BIG_QUERY + " returned only " + rows + " rows");
            }
          } catch (Exception e) {
            st.close();
            throw e;
          }
          final ResultSet open = rs;
          long start = System.nanoTime();
          Future<?> closing =
              executor.submit(
                  () -> {
                    open.close();
                    st.close();
                    return null;
                  });
          try {
            closing.get(CLOSE_TIMEOUT_SECONDS, TimeUnit.SECONDS);
          } catch (TimeoutException e) {
            throw new CheckFailed(
                "closing the ResultSet and Statement after 10 rows took more than "
                    + CLOSE_TIMEOUT_SECONDS
                    + " s");
          } catch (ExecutionException e) {
            throw new CheckFailed("closing after 10 rows failed: " + describe(e.getCause()));
          }
          System.out.printf(
              Locale.ROOT, "  closed after 10 rows in %.2f s%n", (System.nanoTime() - start) / 1e9);
        });
    check(
        "connection-after-close",
        () -> {
          long one = queryLong(conn, "SELECT 1");
          if (one != 1) {
            throw new CheckFailed("SELECT 1 returned " + one);
          }
        });

    // 6. Data changes over SQL are refused.
    check(
        "read-only",
        () -> {
          String sql = "INSERT INTO " + table + " VALUES (1)";
          try (Statement st = conn.createStatement()) {
            st.execute(sql);
          } catch (SQLException e) {
            String msg = Tally.oneLine(e.getMessage());
            System.out.println("  refused: " + msg);
            String lower = msg.toLowerCase(Locale.ROOT);
            if (!lower.contains("read-only") && !lower.contains("read only")) {
              System.out.println("  note: the message does not say read-only");
            }
            return;
          }
          throw new CheckFailed(sql + " did not throw an SQLException");
        });

    check(
        "close-connection",
        () -> {
          conn.close();
          if (!conn.isClosed()) {
            throw new CheckFailed("isClosed() is false after close()");
          }
        });
    return tally.summary();
  }

  private long countSince(String sql, Timestamp since) throws Exception {
    try (PreparedStatement ps = conn.prepareStatement(sql)) {
      // With a UTC calendar the driver sends exactly the instant's epoch milliseconds.
      ps.setTimestamp(1, since, UTC);
      try (ResultSet rs = ps.executeQuery()) {
        return singleLong(rs, sql);
      }
    }
  }

  private static long queryLong(Connection c, String sql) throws Exception {
    try (Statement st = c.createStatement();
        ResultSet rs = st.executeQuery(sql)) {
      return singleLong(rs, sql);
    }
  }

  private static long singleLong(ResultSet rs, String sql) throws Exception {
    if (!rs.next()) {
      throw new CheckFailed(sql + " returned no row");
    }
    long v = rs.getLong(1);
    if (rs.wasNull()) {
      throw new CheckFailed(sql + " returned NULL");
    }
    if (rs.next()) {
      throw new CheckFailed(sql + " returned more than one row");
    }
    return v;
  }

  private static List<String> column(ResultSet rs, String name) throws SQLException {
    List<String> out = new ArrayList<>();
    try (rs) {
      while (rs.next()) {
        out.add(rs.getString(name));
      }
    }
    return out;
  }

  private static int drain(ResultSet rs) throws SQLException {
    int n = 0;
    try (rs) {
      int cols = rs.getMetaData().getColumnCount();
      while (rs.next()) {
        for (int i = 1; i <= cols; i++) {
          rs.getObject(i);
        }
        n++;
      }
    }
    return n;
  }

  private static String describeParameter(ParameterMetaData pmd) {
    try {
      return pmd.getParameterTypeName(1)
          + " (java.sql.Types "
          + pmd.getParameterType(1)
          + ", class "
          + pmd.getParameterClassName(1)
          + ")";
    } catch (SQLException e) {
      return "type unknown: " + describe(e);
    }
  }

  /** Runs one check with a time limit and prints its PASS or FAIL line. */
  private boolean check(String name, Body body) {
    Tally.Outcome outcome =
        tally.check(executor, CHECK_TIMEOUT_SECONDS, name, body, JdbcCheck::describe);
    if (outcome == Tally.Outcome.TIMED_OUT) {
      // The stuck thread is abandoned; later checks get a fresh one.
      executor.shutdownNow();
      executor = newExecutor();
    }
    return outcome == Tally.Outcome.PASSED;
  }

  /** An exception and its causes as one line, without stack traces. */
  private static String describe(Throwable t) {
    StringBuilder sb = new StringBuilder();
    String last = null;
    for (int depth = 0; t != null && depth < 8; t = t.getCause(), depth++) {
      String msg = t.getMessage();
      String part = t.getClass().getSimpleName() + (msg == null ? "" : ": " + msg);
      if (last != null && msg != null && last.contains(msg)) {
        continue; // wrappers often repeat their cause's message
      }
      if (sb.length() > 0) {
        sb.append(" <- ");
      }
      sb.append(part);
      last = msg == null ? "" : msg;
    }
    return sb.toString();
  }

  private static ExecutorService newExecutor() {
    return Executors.newCachedThreadPool(
        r -> {
          Thread t = new Thread(r, "jdbc-check");
          t.setDaemon(true);
          return t;
        });
  }
}
