/**
 * S7: per-key request budgets, a token bucket per key: `limit` calls a window, refilled evenly, so
 * a burst of up to `limit` passes (a tab sending a reconnect backlog) and a steady caller gets
 * `limit` per window. In memory, per API process: N processes behind a balancer allow N times the
 * limit. That is the documented trade-off (docs/security.md, Request limits): it needs no round trip
 * on the hot path, and the limit protects a process, which is what it is for.
 */
export class KeyRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private lastPrune = 0;

  constructor(
    /** Calls per window; 0 turns the limiter off. */
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes one call from `key`'s budget: null when it may go on, else seconds until it may. */
  take(key: string): number | null {
    if (this.limit === 0) return null;
    const now = this.now();
    this.prune(now);
    const perMs = this.limit / this.windowMs;
    const bucket = this.buckets.get(key) ?? { tokens: this.limit, at: now };
    bucket.tokens = Math.min(this.limit, bucket.tokens + (now - bucket.at) * perMs);
    bucket.at = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return null;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000));
  }

  /** A bucket that has refilled is the same as none: dropped once a window, so memory stays small. */
  private prune(now: number): void {
    if (now - this.lastPrune < this.windowMs) return;
    this.lastPrune = now;
    for (const [key, bucket] of this.buckets) {
      if (now - bucket.at >= this.windowMs) this.buckets.delete(key);
    }
  }
}
