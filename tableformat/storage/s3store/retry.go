package s3store

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// class is what a failed request tells about the object and about retrying.
type class int

const (
	// permanent: an answer from the server that a retry would not change
	// (403, 400, ...).
	permanent class = iota
	// missing: 404, the key (or the bucket) does not exist.
	missing
	// precondition: 412, If-None-Match or If-Match did not hold.
	precondition
	// conflict: 409, S3's ConditionalRequestConflict: a concurrent
	// conditional write to the same key was in progress.
	conflict
	// transient: throttling, a 5xx, a request timeout, or no answer at all
	// (connection refused or reset, the response lost). The request may
	// or may not have taken effect.
	transient
)

// classify sorts err, returned by an S3 call, into a class.
func classify(err error) class {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil || re.HTTPStatusCode() == 0 {
		// No HTTP answer: a transport error or a timeout. Whether the
		// server acted on the request is unknown.
		return transient
	}
	switch code := re.HTTPStatusCode(); {
	case code == http.StatusNotFound:
		return missing
	case code == http.StatusPreconditionFailed:
		return precondition
	case code == http.StatusConflict:
		return conflict
	case code == http.StatusTooManyRequests, code == http.StatusRequestTimeout, code >= 500:
		return transient
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed", "InternalError":
			return transient
		}
	}
	return permanent
}

// retrier runs requests with exponential backoff and full jitter.
type retrier struct {
	attempts       int
	base, max      time.Duration
	attemptTimeout time.Duration
}

// wait sleeps before retry number n (1 for the first retry).
func (r retrier) wait(n int) {
	d := r.base << min(n-1, 20)
	if d > r.max || d <= 0 {
		d = r.max
	}
	time.Sleep(d/2 + rand.N(d/2+1))
}

// ctx returns the context for one attempt.
func (r retrier) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.attemptTimeout)
}

// do runs call until it succeeds, fails in a way other than transient, or
// runs out of attempts; it returns the last error. Only idempotent
// requests go through do: GET, HEAD, LIST, DELETE, and PUT or COPY that
// replace a key unconditionally.
func (r retrier) do(call func(ctx context.Context) error) error {
	var err error
	for n := range r.attempts {
		if n > 0 {
			r.wait(n)
		}
		ctx, cancel := r.ctx()
		err = call(ctx)
		cancel()
		if err == nil || classify(err) != transient {
			return err
		}
	}
	return err
}
