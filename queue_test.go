package pgqueue

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateQueueName(t *testing.T) {
	t.Parallel()
	good := []string{"a", "emails", "Emails.v2", "tenant-1:reports", "x_y", strings.Repeat("q", 128)}
	for _, name := range good {
		if err := ValidateQueueName(name); err != nil {
			t.Errorf("ValidateQueueName(%q) = %v, want nil", name, err)
		}
	}
	bad := []string{"", "-lead", "_lead", "with space", "semi;colon", "quote'", `dq"`, "new\nline",
		"ünïcode", "a)--", strings.Repeat("q", 129), "robert'); DROP TABLE pgqueue_jobs;--"}
	for _, name := range bad {
		err := ValidateQueueName(name)
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("ValidateQueueName(%q) = %v, want ErrInvalidOption", name, err)
		}
	}
}
