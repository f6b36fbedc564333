// The certified oidc-provider package ships no type declarations: the little of it the tests use
// (test/support/oidc-provider-server.ts).
declare module 'oidc-provider' {
  import type { RequestListener } from 'node:http';
  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    callback(): RequestListener;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }
}
