package applier

import (
	"slices"
	"sync"
	"time"
)

// notifyInterval is the least time between two NOTIFY rounds: the changes of a burst (a relist of
// thousands of services moves the serial at most once a second anyway) go out as one NOTIFY per
// changed zone, not one per change.
const notifyInterval = time.Second

// notifier sends NOTIFY for changed zones, through the transfer plugin, from a goroutine of its own:
// a secondary that does not answer costs the transfer plugin seconds of retries, which must not
// hold the applier up.
type notifier struct {
	send func(zone string) error

	mu    sync.Mutex
	zones map[string]bool // changed since the last round
	kick  chan struct{}
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func newNotifier(send func(zone string) error) *notifier {
	return &notifier{send: send, zones: map[string]bool{}, kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// changed queues zones for the next round. A nil notifier (no transfer plugin) does nothing.
func (n *notifier) changed(zones []string) {
	if n == nil || len(zones) == 0 {
		return
	}
	n.mu.Lock()
	for _, z := range zones {
		n.zones[z] = true
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *notifier) start() {
	n.wg.Add(1)
	go n.run()
}

func (n *notifier) run() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case <-n.kick:
		}
		n.mu.Lock()
		zones := make([]string, 0, len(n.zones))
		for z := range n.zones {
			zones = append(zones, z)
		}
		clear(n.zones)
		n.mu.Unlock()
		slices.Sort(zones)
		for _, z := range zones {
			if err := n.send(z); err != nil {
				log.Warningf("NOTIFY for %s: %v", z, err)
			}
		}
		t := time.NewTimer(notifyInterval)
		select {
		case <-n.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// close stops the goroutine and waits for it; it may be called more than once, and on nil.
func (n *notifier) close() error {
	if n == nil {
		return nil
	}
	n.once.Do(func() { close(n.stop) })
	n.wg.Wait()
	return nil
}
