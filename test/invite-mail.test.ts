/**
 * U9 (issue 36 scope 8): invites by email, only when an SMTP server is set. The mail server is a
 * real SMTP server (`smtp-server`) on 127.0.0.1 that asks for a password, and refuses or goes away
 * on demand; the invite is always a link to copy as well, valid whatever the mail server did.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { SMTPServer } from 'smtp-server';
import { ConfigError, loadConfig } from '../src/config.ts';
import { startHarness, type Harness } from './support/harness.ts';

const SMTP_PASSWORD = 'smtp-secret-password-1234';

interface Received {
  to: string[];
  body: string;
}

/** A mail server with a login, keeping what it accepted; `refuse` answers 550 to every recipient. */
async function startMailServer() {
  const received: Received[] = [];
  const state = { refuse: false };
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, done) {
      if (auth.username === 'verbatim' && auth.password === SMTP_PASSWORD) done(null, { user: 'verbatim' });
      else done(new Error('invalid login'));
    },
    onRcptTo(address, _session, done) {
      if (state.refuse) {
        const err = new Error('mailbox unavailable') as Error & { responseCode: number };
        err.responseCode = 550;
        done(err);
      } else done();
    },
    onData(stream, session, done) {
      let body = '';
      stream.on('data', (c: Buffer) => (body += c.toString()));
      stream.on('end', () => {
        received.push({ to: session.envelope.rcptTo.map((r) => r.address), body });
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    received,
    state,
    url: `smtp://verbatim:${SMTP_PASSWORD}@127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function redeem(h: Harness, token: string, email: string): Promise<number> {
  const res = await h.api.inject({
    method: 'POST',
    url: '/v1/auth/links/redeem',
    payload: { token, email, name: 'Invited', password: 'correct horse battery' },
  });
  return res.statusCode;
}

void describe('invites by email (U9)', () => {
  let h: Harness;
  let mail: Awaited<ReturnType<typeof startMailServer>>;

  before(async () => {
    mail = await startMailServer();
    h = await startHarness({
      env: { VERBATIM_SMTP_URL: mail.url, VERBATIM_PUBLIC_URL: 'https://notes.example.com/' },
    });
  });
  after(async () => {
    await h?.close();
    await mail?.close();
  });

  void it('U9: with an SMTP server set, an invite is emailed with its link to the public address; the link joins; no password or token reaches the logs', async () => {
    const methods = await h.request('GET', '/v1/auth/methods');
    assert.equal(methods.json.emailInvites, true);
    const invite = await h.request('POST', '/v1/invites', {
      role: 'member',
      email: 'new.person@example.com',
    });
    assert.equal(invite.status, 201, invite.text);
    assert.equal(invite.json.emailedTo, 'new.person@example.com');
    assert.equal(invite.json.emailError, null);
    assert.equal(mail.received.length, 1);
    const message = mail.received[0]!;
    assert.deepEqual(message.to, ['new.person@example.com']);
    const link = `https://notes.example.com/#/join/${invite.json.token as string}`;
    assert.ok(message.body.replace(/=\r?\n/g, '').includes(link), message.body);
    assert.match(message.body, /as a member/);
    assert.equal(await redeem(h, invite.json.token, 'new.person@example.com'), 200);
    assert.doesNotMatch(h.logs(), new RegExp(SMTP_PASSWORD));
    assert.doesNotMatch(h.logs(), new RegExp(invite.json.token as string));
  });

  void it('U9: a mail server that refuses the address, or cannot be reached, leaves the invite valid and says why', async () => {
    mail.state.refuse = true;
    const refused = await h.request('POST', '/v1/invites', { role: 'viewer', email: 'refused@example.com' });
    assert.equal(refused.status, 201, refused.text);
    assert.equal(refused.json.emailedTo, null);
    assert.equal(refused.json.emailError, 'the mail server refused the message (550)');
    assert.equal(await redeem(h, refused.json.token, 'refused@example.com'), 200);
    mail.state.refuse = false;

    await mail.close();
    const down = await h.request('POST', '/v1/invites', { role: 'viewer', email: 'down@example.com' });
    assert.equal(down.status, 201, down.text);
    assert.equal(down.json.emailedTo, null);
    assert.match(down.json.emailError, /^the mail server could not be reached/);
    assert.doesNotMatch(down.json.emailError, new RegExp(SMTP_PASSWORD));
    assert.equal(await redeem(h, down.json.token, 'down@example.com'), 200);
    assert.doesNotMatch(h.logs(), new RegExp(SMTP_PASSWORD));
  });

  void it('U9: a malformed address is a 400 naming it, and nothing is made', async () => {
    for (const email of ['not an address', 'a@b', 'x@example.com, y@example.com', 42]) {
      const res = await h.request('POST', '/v1/invites', { role: 'member', email });
      assert.equal(res.status, 400, `${String(email)}: ${res.text}`);
      assert.equal(res.json.error.code, 'invite.email');
    }
  });
});

void describe('invites without a mail server (U9)', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(() => h?.close());

  void it('U9: with no SMTP server set, an invite is a link to copy; asking to email one is a 400 that says so', async () => {
    assert.equal((await h.request('GET', '/v1/auth/methods')).json.emailInvites, false);
    const plain = await h.request('POST', '/v1/invites', { role: 'member' });
    assert.equal(plain.status, 201, plain.text);
    assert.equal(plain.json.emailedTo, null);
    assert.equal(plain.json.emailError, null);
    const emailed = await h.request('POST', '/v1/invites', { role: 'member', email: 'someone@example.com' });
    assert.equal(emailed.status, 400);
    assert.equal(emailed.json.error.code, 'invite.email_off');
    assert.match(emailed.json.error.message, /VERBATIM_SMTP_URL/);
  });

  void it('U9: an SMTP or public address that is not one is refused at start, naming the setting', () => {
    assert.throws(
      () => loadConfig({ VERBATIM_SMTP_URL: 'http://mail.example.com' }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, /VERBATIM_SMTP_URL must be a smtp or smtps URL/);
        return true;
      },
    );
    assert.throws(
      () => loadConfig({ VERBATIM_PUBLIC_URL: 'notes.example.com' }),
      /VERBATIM_PUBLIC_URL must be a http or https URL/,
    );
  });
});
