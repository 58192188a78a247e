"""pyarrow's C++ Flight server holding a table's batches in memory: the
DoGet ceiling that BenchmarkFlightDoGetPyArrow compares tsflight with.

    python3 pyarrow_ceiling.py EP0.arrow [EP1.arrow ...]

Each argument is an Arrow IPC file holding the batches of one endpoint,
as tsflight sent them. GetFlightInfo (any descriptor) answers one endpoint
per file, with ticket b"<i>"; DoGet streams file i's batches from memory,
unchanged, through pyarrow's RecordBatchStream (C++ all the way: no
Python runs per batch). The server listens on 127.0.0.1 on a free port and
prints "ADDR 127.0.0.1:<port>" once it serves; SIGTERM ends it.
"""

import sys

import pyarrow as pa
import pyarrow.flight as flight


class Ceiling(flight.FlightServerBase):
    def __init__(self, tables):
        super().__init__("grpc://127.0.0.1:0")
        self.tables = tables

    def get_flight_info(self, context, descriptor):
        endpoints = [
            flight.FlightEndpoint(str(i).encode(), [])
            for i in range(len(self.tables))
        ]
        return flight.FlightInfo(
            self.tables[0].schema, descriptor, endpoints, -1, -1
        )

    def do_get(self, context, ticket):
        try:
            i = int(ticket.ticket)
        except ValueError:
            raise flight.FlightServerError("ticket is not an endpoint number")
        if not 0 <= i < len(self.tables):
            raise flight.FlightServerError("no such endpoint")
        return flight.RecordBatchStream(self.tables[i])


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: pyarrow_ceiling.py EP0.arrow [EP1.arrow ...]")
    tables = []
    for path in sys.argv[1:]:
        # Read into memory (not mapped); read_all keeps the file's
        # batches as the table's chunks, which DoGet sends as they are.
        with pa.OSFile(path) as src:
            tables.append(pa.ipc.open_file(src).read_all())
    server = Ceiling(tables)
    print(f"ADDR 127.0.0.1:{server.port}", flush=True)
    server.serve()


if __name__ == "__main__":
    main()
