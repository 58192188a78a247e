"""The gRPC health service (grpc.health.v1) of `tsflight serve`, asked
through grpcio's health stub (grpcio-health-checking), as an orchestrator
would: no token, on the Flight port.

    python health_check.py HOST:PORT [--ca CA.pem]
        Checks "" (the server) and arrow.flight.protocol.FlightService;
        prints "SERVICE STATUS" per service ("" for the server) and exits
        0 when both are SERVING, 1 otherwise.
    python health_check.py HOST:PORT --unknown NAME
        Checks NAME; prints "CODE MESSAGE" of the refusal (NOT_FOUND for a
        service the server does not report).
    python health_check.py HOST:PORT --watch
        Watches "": prints each status as it arrives, then "ended CODE"
        when the server ends the stream (UNAVAILABLE after the NOT_SERVING
        of a shutdown).

With --ca the connection is TLS, verified against CA.pem. Needs grpcio
and grpcio-health-checking (.ci/requirements.txt).
"""

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

FLIGHT_SERVICE = "arrow.flight.protocol.FlightService"


def status_name(status):
    return health_pb2.HealthCheckResponse.ServingStatus.Name(status)


def channel(address, ca):
    if ca:
        with open(ca, "rb") as f:
            return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=f.read()))
    return grpc.insecure_channel(address)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("address", help="HOST:PORT of tsflight serve")
    p.add_argument("--ca", help="PEM file of the CA that signed the server's certificate (TLS)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--watch", action="store_true", help='watch "" until the server ends the stream')
    mode.add_argument("--unknown", metavar="NAME", help="check a service the server does not report")
    args = p.parse_args()

    with channel(args.address, args.ca) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        if args.watch:
            try:
                for resp in stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=60):
                    print(status_name(resp.status), flush=True)
            except grpc.RpcError as e:
                print("ended", e.code().name, flush=True)
                return 0
            print("ended OK", flush=True)
            return 0
        if args.unknown is not None:
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(service=args.unknown), timeout=10)
            except grpc.RpcError as e:
                print(e.code().name, e.details())
                return 0
            print("answered", status_name(resp.status))
            return 1
        ok = True
        for service in ("", FLIGHT_SERVICE):
            resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            print('"%s"' % service if service == "" else service, status_name(resp.status))
            ok = ok and resp.status == health_pb2.HealthCheckResponse.SERVING
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
