package pgqueueotel

import "go.opentelemetry.io/otel/attribute"

// The attribute keys of OpenTelemetry's messaging semantic conventions, written out here rather
// than taken from a semconv package so that this module does not pin one version of it. Their
// names follow the conventions as of semconv 1.26 and later (operation types "send" and
// "process", messaging.operation.name).
const (
	keyMessagingSystem          = attribute.Key("messaging.system")
	keyDestinationName          = attribute.Key("messaging.destination.name")
	keyOperationType            = attribute.Key("messaging.operation.type")
	keyOperationName            = attribute.Key("messaging.operation.name")
	keyMessageID                = attribute.Key("messaging.message.id")
	keyBatchMessageCount        = attribute.Key("messaging.batch.message_count")
	keyErrorType                = attribute.Key("error.type")
	systemPgqueue               = "pgqueue"
	operationSend               = "send"
	operationProcess            = "process"
	keyJobAttempt               = attribute.Key("pgqueue.job.attempt")
	keyJobOutcome               = attribute.Key("pgqueue.job.outcome")
	keyEnqueueInTx              = attribute.Key("pgqueue.enqueue.in_tx")
	instrumentationScope string = "github.com/pgqueue/pgqueue/otel"
)

// Values of keyJobOutcome: what became of an attempt, as the worker settles it.
const (
	outcomeCompleted  = "completed"
	outcomeRetrying   = "retrying"
	outcomeFailed     = "failed"
	outcomeSnoozed    = "snoozed"
	outcomeCancelled  = "cancelled"
	outcomeLockLost   = "lock_lost"
	outcomeHandedBack = "handed_back"
)
