import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { LookupFunction } from 'node:net';
import { PassThrough } from 'node:stream';
import type { Readable } from 'node:stream';

/**
 * S5: one guard for every URL a tenant supplies (calendar feeds, webhook endpoints, recording links
 * a bot provider names). A name is resolved once, every address it resolves to is checked, and the
 * connection goes to the address that was checked — the check is the socket's own lookup, so a
 * second answer (DNS rebinding) never reaches a socket. Loopback, private, link-local (the cloud
 * metadata address among them), CGNAT, unique-local, multicast, reserved and unspecified addresses
 * are refused in every notation (the WHATWG URL parser turns `2130706433` and `0x7f.1` into
 * `127.0.0.1`; IPv4-mapped, -compatible and NAT64 IPv6 forms are checked as the IPv4 they carry).
 * Every redirect is checked again the same way. An operator may allow internal ranges on purpose
 * (`VERBATIM_EGRESS_ALLOW`, CIDRs). Operator-configured endpoints (Whisper, chat, Recall's API, S3)
 * do not go through it.
 */

/** What a tenant may see of a failed fetch: a category, never what the remote end said. */
export type EgressFailure =
  | 'egress_refused'
  | 'dns_failure'
  | 'connection_refused'
  | 'connection_failed'
  | 'timeout'
  | 'too_large'
  | 'too_many_redirects'
  | 'bad_url';

export class EgressError extends Error {
  constructor(
    readonly category: EgressFailure,
    message: string,
  ) {
    super(message);
    this.name = 'EgressError';
  }
}

const FORBIDDEN_V4 = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const;

const FORBIDDEN_V6 = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['2001::', 23], // IETF protocol assignments (Teredo and others)
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const;

const forbidden = new net.BlockList();
for (const [address, prefix] of FORBIDDEN_V4) forbidden.addSubnet(address, prefix, 'ipv4');
for (const [address, prefix] of FORBIDDEN_V6) forbidden.addSubnet(address, prefix, 'ipv6');

/** The IPv4 address an IPv6 one carries (mapped, compatible, NAT64 or 6to4), or null. */
function embeddedIpv4(address: string): string | null {
  const groups = expandIpv6(address);
  if (!groups) return null;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), ::ffff:0:a.b.c.d (translated)
  if (zero(0, 5) && (groups[5] === 0xffff || groups[5] === 0)) return v4(groups[6]!, groups[7]!);
  if (zero(0, 4) && groups[4] === 0xffff && groups[5] === 0) return v4(groups[6]!, groups[7]!);
  // 64:ff9b::a.b.c.d (NAT64, well-known and local-use prefixes)
  if (groups[0] === 0x64 && groups[1] === 0xff9b) return v4(groups[6]!, groups[7]!);
  // 2002:AABB:CCDD::/48 (6to4)
  if (groups[0] === 0x2002) return v4(groups[1]!, groups[2]!);
  return null;
}

function expandIpv6(address: string): number[] | null {
  let text = address.toLowerCase().split('%')[0]!;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const parts = dotted[1]!.split('.').map(Number);
    if (parts.some((p) => p > 255)) return null;
    text = `${text.slice(0, -dotted[1]!.length)}${((parts[0]! << 8) | parts[1]!).toString(16)}:${((parts[2]! << 8) | parts[3]!).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const a = head === '' ? [] : head.split(':');
  const b = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? 0 : 8 - a.length - b.length;
  if (fill < 0) return null;
  const groups = [...a, ...Array<string>(fill).fill('0'), ...b].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff)
    ? groups
    : null;
}

/** Parses `VERBATIM_EGRESS_ALLOW`: comma-separated CIDRs (or single addresses). */
export function parseEgressAllow(text: string): net.BlockList {
  const list = new net.BlockList();
  for (const item of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [address, prefixText] = item.split('/') as [string, string | undefined];
    const family = net.isIP(address);
    if (family === 0) throw new Error(`VERBATIM_EGRESS_ALLOW: "${item}" is not an address or CIDR`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    const prefix = prefixText === undefined ? (family === 4 ? 32 : 128) : Number(prefixText);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128)) {
      throw new Error(`VERBATIM_EGRESS_ALLOW: "${item}" has a bad prefix length`);
    }
    list.addSubnet(address, prefix, type);
  }
  return list;
}

export interface EgressRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  timeoutMs: number;
  /** Answers longer than this are cut off (`too_large`). */
  maxBytes: number;
  /** How many redirects to follow, each checked again; 0 answers the 3xx itself. */
  maxRedirects?: number;
  /** A further rule for every URL of the chain (a scheme policy): a message refuses it. */
  checkUrl?: (url: URL) => string | null;
}

export interface EgressResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The URL that answered, after redirects. */
  url: string;
}

/**
 * B10: an answer whose body is read as it arrives. The body stream fails with an `EgressError`
 * (`too_large`, `timeout`, `connection_failed`) when the answer outgrows `maxBytes`, the deadline
 * passes or the connection breaks before its end.
 */
export interface EgressStreamResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Readable;
  url: string;
}

export class EgressGuard {
  readonly #allow: net.BlockList;

  constructor(allow: net.BlockList | string = '') {
    this.#allow = typeof allow === 'string' ? parseEgressAllow(allow) : allow;
  }

  /** Why this address may not be reached, or null when it may. */
  refusal(address: string): string | null {
    const family = net.isIP(address);
    if (family === 0) return `"${address}" is not an IP address`;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (this.#allow.check(address, type)) return null;
    const inner = family === 6 ? embeddedIpv4(address) : null;
    if (inner !== null) {
      if (this.#allow.check(inner, 'ipv4')) return null;
      if (forbidden.check(inner, 'ipv4')) return `${address} is an internal address (${inner})`;
      return null;
    }
    if (forbidden.check(address, type)) return `${address} is an internal address`;
    return null;
  }

  /**
   * At creation: a URL whose host is an internal address written literally (in any notation the
   * URL parser reads, or `localhost`) is refused at once, with a message naming why. Names are
   * resolved only when fetched.
   */
  literalRefusal(url: URL): string | null {
    const host = url.hostname
      .replace(/^\[|\]$/g, '')
      .replace(/\.$/, '')
      .toLowerCase();
    if (host === 'localhost' || host.endsWith('.localhost')) return `${host} is this server`;
    if (net.isIP(host) === 0) return null;
    return this.refusal(host);
  }

  /** One request through the guard; redirects followed (each hop checked) up to `maxRedirects`. */
  async request(target: string | URL, req: EgressRequest): Promise<EgressResponse> {
    const answer = await this.#follow(target, req);
    return { ...answer, body: await bufferOf(answer.body) };
  }

  /**
   * B10: as `request`, but the final answer's body is handed over as a stream as soon as its
   * headers arrive, so a large download is never held whole. `timeoutMs` still covers the whole
   * body; `maxBytes` is enforced as it flows.
   */
  async requestStream(target: string | URL, req: EgressRequest): Promise<EgressStreamResponse> {
    return this.#follow(target, req);
  }

  async #follow(target: string | URL, req: EgressRequest): Promise<EgressStreamResponse> {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new EgressError('bad_url', 'not a URL');
    }
    const deadline = Date.now() + req.timeoutMs;
    let method = req.method ?? 'GET';
    let body = req.body;
    for (let hop = 0; ; hop++) {
      const answer = await this.#once(url, { ...req, method, body }, deadline);
      const location = answer.headers.location;
      const redirect = answer.status >= 300 && answer.status < 400 && answer.status !== 304 && location;
      if (!redirect || (req.maxRedirects ?? 0) === 0) return answer;
      // A redirect's own body is read (bounded) and dropped.
      await bufferOf(answer.body);
      if (hop >= (req.maxRedirects ?? 0)) throw new EgressError('too_many_redirects', 'too many redirects');
      try {
        url = new URL(location, url);
      } catch {
        throw new EgressError('bad_url', 'a redirect to something that is not a URL');
      }
      if (answer.status === 303 || ((answer.status === 301 || answer.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
    }
  }

  #once(url: URL, req: EgressRequest & { method: string }, deadline: number): Promise<EgressStreamResponse> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return Promise.reject(new EgressError('bad_url', `${url.protocol} URLs are not fetched`));
    }
    const policy = req.checkUrl?.(url) ?? null;
    if (policy !== null) return Promise.reject(new EgressError('egress_refused', policy));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const literal = this.literalRefusal(url);
    if (literal !== null) return Promise.reject(new EgressError('egress_refused', literal));
    const remaining = deadline - Date.now();
    if (remaining <= 0) return Promise.reject(new EgressError('timeout', 'timed out'));
    // The socket's own lookup resolves and checks: what it connects to is what was checked.
    const lookup: LookupFunction = (hostname, options, callback) => {
      dns.lookup(hostname, { all: true, verbatim: true }, (err, addresses) => {
        if (err) {
          callback(new EgressError('dns_failure', `${hostname} could not be resolved`), '', 4);
          return;
        }
        for (const a of addresses) {
          const why = this.refusal(a.address);
          if (why !== null) {
            callback(new EgressError('egress_refused', `${hostname} resolves to ${why}`), '', 4);
            return;
          }
        }
        const first = addresses[0];
        if (!first) {
          callback(new EgressError('dns_failure', `${hostname} has no address`), '', 4);
          return;
        }
        if ((options as { all?: boolean }).all) {
          (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, addresses);
        } else {
          callback(null, first.address, first.family);
        }
      });
    };
    const client = url.protocol === 'https:' ? https : http;
    return new Promise<EgressStreamResponse>((resolve, reject) => {
      // Before the headers, a failure rejects the promise; after them, it fails the body stream.
      let answered: PassThrough | null = null;
      let finished = false;
      const fail = (err: EgressError) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        request.destroy();
        if (answered) answered.destroy(err);
        else reject(err);
      };
      const request = client.request(
        url,
        {
          method: req.method,
          headers: req.headers,
          lookup: net.isIP(host) === 0 ? lookup : undefined,
          agent: false,
        },
        (res) => {
          const body = new PassThrough();
          // Its reader sees a failure through its own listener or iterator; one not read yet must
          // not take the process down.
          body.on('error', () => undefined);
          answered = body;
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > req.maxBytes) {
              fail(new EgressError('too_large', `the answer is larger than ${req.maxBytes} bytes`));
              return;
            }
            // Read no faster than the body's reader takes it.
            if (!body.write(chunk)) res.pause();
          });
          body.on('drain', () => res.resume());
          // A reader that gives up ends the request.
          body.on('close', () => {
            if (!finished) {
              finished = true;
              clearTimeout(timer);
              request.destroy();
            }
          });
          res.on('error', () => fail(new EgressError('connection_failed', 'the connection broke')));
          res.on('close', () => {
            if (!res.complete) fail(new EgressError('connection_failed', 'the connection broke'));
          });
          res.on('end', () => {
            if (finished) return;
            finished = true;
            clearTimeout(timer);
            body.end();
          });
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, url: url.href });
        },
      );
      const timer = setTimeout(() => fail(new EgressError('timeout', 'timed out')), deadline - Date.now());
      request.on('error', (err: NodeJS.ErrnoException) => {
        if (err instanceof EgressError) return fail(err);
        const cause = (err as { cause?: unknown }).cause;
        if (cause instanceof EgressError) return fail(cause);
        if (err.code === 'ECONNREFUSED')
          return fail(new EgressError('connection_refused', 'connection refused'));
        if (err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN') {
          return fail(new EgressError('dns_failure', `${host} could not be resolved`));
        }
        if (err.code === 'ETIMEDOUT') return fail(new EgressError('timeout', 'timed out'));
        fail(new EgressError('connection_failed', `the connection failed (${err.code ?? 'error'})`));
      });
      if (req.body !== undefined) request.end(req.body);
      else request.end();
    });
  }
}

/** A body read whole; its stream's `EgressError` (size, deadline, broken connection) rejects. */
async function bufferOf(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

const guards = new WeakMap<object, EgressGuard>();

/** The guard of an installation's settings (one per config object). */
export function egressGuardOf(config: { egressAllow: string }): EgressGuard {
  let guard = guards.get(config);
  if (!guard) {
    guard = new EgressGuard(config.egressAllow);
    guards.set(config, guard);
  }
  return guard;
}

/** A tenant-facing line for a failed fetch: its category and our own words, never the remote body. */
export function egressFailureText(err: unknown): string {
  if (err instanceof EgressError) return `${err.category}: ${err.message}`;
  return 'connection_failed: the request failed';
}

/** A tenant-facing category for an HTTP status that was not a success. */
export function httpStatusCategory(status: number): string {
  return `http_${Math.floor(status / 100)}xx`;
}
