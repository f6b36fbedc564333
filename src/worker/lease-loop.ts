import type { Logger } from '../log.ts';

/** A loop that leases due work into free slots and runs each item beside the sweeps (F6). */
export interface LeaseLoop {
  /** Leases what is due into the free slots now (the timer does this every tick). */
  tick(): Promise<void>;
  /** Items being run by this process. */
  inFlight(): number;
  /** Stops leasing; waits for the items in flight (each ends by its own timeout). */
  stop(): Promise<void>;
}

export interface LeaseLoopOptions<T> {
  /** What the log says this loop is. */
  name: string;
  tickMs: number;
  /** Items run at once in this process. */
  concurrency: number;
  /** Leases up to `free` due items (fairly across workspaces: the store's query decides). */
  lease(free: number): Promise<T[]>;
  /** Runs one item; a throw is logged, and the item's lease then expires for another try. */
  run(item: T): Promise<void>;
  /** Runs after each lease, one at a time with it (a periodic check of the loop's own). */
  afterLease?: () => Promise<void>;
  log: Logger;
}

/**
 * F6: slow neighbours stay outside the sweep. A receiver or a feed that never answers holds one
 * slot of this loop until its timeout and nothing else: not a lease reclaim, not another
 * workspace's item. A slot that frees leases again at once; one lease at a time in a process (a
 * tick that finds one running is folded into it).
 */
export function startLeaseLoop<T>(o: LeaseLoopOptions<T>): LeaseLoop {
  const running = new Set<Promise<void>>();
  let stopped = false;
  let leasing: Promise<void> | null = null;
  const fill = async (): Promise<void> => {
    const free = o.concurrency - running.size;
    if (free > 0) {
      for (const item of await o.lease(free)) {
        const done: Promise<void> = o
          .run(item)
          .catch((err: unknown) =>
            o.log.warn({ loop: o.name, err: String(err) }, 'an item was not finished; its lease will expire'),
          )
          .finally(() => {
            running.delete(done);
            if (!stopped) void tick();
          });
        running.add(done);
      }
    }
    await o.afterLease?.();
  };
  const tick = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    leasing ??= fill()
      .catch((err: unknown) => o.log.warn({ loop: o.name, err: String(err) }, 'loop tick failed'))
      .finally(() => {
        leasing = null;
      });
    return leasing;
  };
  const timer = setInterval(() => void tick(), o.tickMs);
  return {
    tick,
    inFlight: () => running.size,
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await leasing;
      await Promise.allSettled([...running]);
    },
  };
}
