package pgqueue

// wakeup is a wake-up signal for a loop that sleeps until something may need doing: signal leaves
// one pending signal, however often it is called before the loop looks, so a burst of reasons
// costs one wake-up. The loop receives from it in its select.
type wakeup chan struct{}

func newWakeup() wakeup { return make(wakeup, 1) }

// signal leaves a pending signal unless one is already there. It never blocks.
func (w wakeup) signal() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// wakeups are the runtime's signals, one for each part that sleeps: a part sleeps on its own and
// the others signal it.
type wakeups struct {
	claim       wakeup // the claimer: a queue may want a claim, a slot freed, outcomes were settled
	express     wakeup // the claimer's express loop: a queue has new jobs
	maintain    wakeup // the maintainer: a queue wants promotion, or a rescue was asked for
	settle      wakeup // the completer: outcomes, or starts of jobs claimed ahead, to write
	beat        wakeup // the heartbeater: check the leases now (a reconnect, a cancellation)
	reconnected wakeup // the claimer, after a failed claim: the listener is back, so is the database
	freed       wakeup // shutdown: a handler returned or was given up
}

func newWakeups() wakeups {
	return wakeups{claim: newWakeup(), express: newWakeup(), maintain: newWakeup(), settle: newWakeup(), beat: newWakeup(),
		reconnected: newWakeup(), freed: newWakeup()}
}
