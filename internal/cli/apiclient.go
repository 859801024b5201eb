package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/manifold-run/manifold/bus"
)

// apiTimeoutDefault bounds one API request when ctx has no earlier
// deadline.
const apiTimeoutDefault = 30 * time.Second

// errNoCoordinator: nobody serves the API.
var errNoCoordinator = errors.New("no coordinator answered (is `manifold coordinator` running against this server?)")

// callAPI sends req as JSON to an endpoint of the micro service and decodes
// the reply into reply. An error reply is returned as *bus.APIError.
func callAPI(ctx context.Context, nc *nats.Conn, subject string, req, reply any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, apiTimeoutDefault)
		defer cancel()
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	bus.InjectTrace(ctx, msg.Header)
	resp, err := nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%s: %w", subject, errNoCoordinator)
	} else if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	var er bus.ErrorReply
	if err := json.Unmarshal(resp.Data, &er); err != nil {
		return fmt.Errorf("%s: unreadable reply: %w", subject, err)
	}
	if er.Error != nil {
		return er.Error
	}
	if err := json.Unmarshal(resp.Data, reply); err != nil {
		return fmt.Errorf("%s: unreadable reply: %w", subject, err)
	}
	return nil
}

// apiExit prints an API error and returns its exit code: 2 for invalid
// requests and unknown runs, 1 for conflicts, 3 otherwise.
func apiExit(st IO, cmd string, err error) int {
	fmt.Fprintf(st.Stderr, "manifold %s: %v\n", cmd, err)
	var ae *bus.APIError
	if errors.As(err, &ae) {
		switch ae.Code {
		case bus.APIInvalid, bus.APINotFound:
			return ExitInvalid
		case bus.APIConflict:
			return ExitFailed
		}
	}
	return ExitUnavailable
}
