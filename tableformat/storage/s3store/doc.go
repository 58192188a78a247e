/*
Package s3store is a [storage.FS] on S3-compatible object storage: the
files of a table are the objects under a prefix of one bucket, with the
same bytes as on a local disk.

[New] takes an *s3.Client of aws-sdk-go-v2, a bucket and a prefix. Every
call of the seam maps to a few requests; docs/format/object-storage.md
has the table of them, and each method's comment says what it does.

# What holds on S3

  - Exactly one writer wins a name. CreateExclusive and Link are PUTs with
    If-None-Match: *; the store's 412, and its 409 for a concurrent
    conditional write, are fs.ErrExist. This is what makes a commit
    (temporary object, then Link to the version's name) safe with many
    writers on many machines.
  - File.Sync means durable: it returns after the store acknowledged a PUT
    of the whole content. Files are buffered in memory and stored by Sync
    and Close.
  - MkdirAll and SyncDir make no request. S3 has no directories (a
    "directory" exists while a key lies under it), and an acknowledged PUT,
    COPY or DELETE is already durable and visible to GET and LIST.
  - Link is a GET and a conditional PUT, not a CopyObject: the S3 API
    has If-None-Match on CopyObject, but a store may ignore it, and
    versitygw v1.8.0 does (a copy onto an existing key with If-None-Match: *
    replaced it).
  - Rename is a COPY and a DELETE: the new name is replaced atomically,
    but for a moment both names exist. tableformat renames only onto
    CURRENT, which is a hint. Exchange is unsupported.
  - An object and a "directory" may share a name on S3; tsflight's layout
    never creates such pairs, and the FS does not check for them.

# Retries and unknown outcomes

Requests that fail transiently (no answer, a timeout, 5xx, 429, SlowDown)
are retried with exponential backoff and jitter ([Options]); the client's
own retryer is turned off per call. A conditional PUT whose outcome is
unknown is never resent blindly and never guessed: it carries a random
token in its metadata, and the key is read back. Our token and bytes mean
it was stored; anything else there means the condition failed; nothing
there means it is sent again. If the key cannot be read either, the error
says the outcome is unknown.

# Why aws-sdk-go-v2

Issue 23 allowed gocloud.dev/blob s3blob v0.49.0, aws-sdk-go-v2
service/s3 v1.114.10 or minio-go v7.4.1; all three send If-None-Match: *
and work against versitygw v1.8.0. Measured on the project's 2-core machine
(heavily shared, so latencies are rough), sequential requests against
versitygw v1.8.0 on 127.0.0.1, 1 KiB objects, median of 100 (LIST: of 20,
100 keys), the second round of each of two runs:

	client            PUT          cond. PUT    GET          LIST
	aws-sdk-go-v2     3.52/1.99ms  3.46/1.67ms  0.86/0.85ms   8.66/7.64ms
	minio-go          3.24/1.96ms  3.56/1.87ms  0.80/0.80ms   8.99/12.00ms
	gocloud s3blob    2.53/2.06ms  2.83/2.09ms  1.02/0.89ms  10.50/7.92ms

and the size a static linux/amd64 binary grows by (-trimpath, CGO off)
when it imports the client with what it needs to read credentials from the
standard AWS environment: aws-sdk-go-v2 with its config module +9.7 MB
(+6.5 MB without config, as this package uses it now), minio-go +5.8 MB,
gocloud.dev/blob/s3blob +26.2 MB.

The latencies do not separate the three (the server dominates). gocloud is
the largest by far, runs on aws-sdk-go-v2 anyway, and hides what this
package needs to see behind portable error codes (IfNotExist fails with
FailedPrecondition; a 409, or a transport failure after the request was
sent, has to be dug out with ErrorAs). minio-go is the smallest, but
issue 23 asks for the standard AWS environment and shared config
(AWS_REGION, AWS_ENDPOINT_URL, profiles), which minio-go does not read as
a whole (it takes the endpoint as an argument and reads only credentials
from the environment and the credentials file), while aws-sdk-go-v2's
config module reads it as the AWS tools do. aws-sdk-go-v2 gives the HTTP status and S3 error
code of every failure, per-call retry control, If-None-Match and If-Match
on PutObject, ranged GETs with If-Match, and an HTTPClient hook that the
fault-injection tests use.
*/
package s3store
