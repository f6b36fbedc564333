// Issue 36 (U9): people in the web app, end to end in Debian's Chromium — single sign-on against a
// real OpenID provider (oidc-provider on 127.0.0.1), a viewer who cannot delete, and a share link
// that shows one meeting to someone with no account.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Role } from '../src/domain/roles.ts';
import { createInviteLink } from '../src/workspaces/sign-in.ts';
import {
  assertAccessible,
  buildWebApp,
  launchChromium,
  screenshot,
  serveWebApp,
  type Browser,
  type WebServer,
  VIEWPORTS,
} from './support/browser.ts';
import { SPEECH, speechWav, startHarness, waitForMeeting, type Harness } from './support/harness.ts';
import { startTestIdp, type TestIdp } from './support/oidc-provider-server.ts';

const PASSWORD = 'correct horse battery';

void describe('people in the web app (U9)', () => {
  let h: Harness;
  let idp: TestIdp;
  let web: WebServer;
  const browsers: Browser[] = [];

  before(async () => {
    idp = await startTestIdp();
    h = await startHarness({
      env: {
        VERBATIM_OIDC_ISSUER: idp.issuer,
        VERBATIM_OIDC_CLIENT_ID: idp.clientId,
        VERBATIM_OIDC_CLIENT_SECRET: idp.clientSecret,
        VERBATIM_OIDC_ALLOWED_DOMAINS: 'example.com',
        VERBATIM_OIDC_LABEL: 'Example SSO',
      },
    });
    h.spawnWorker();
    web = await serveWebApp(h, buildWebApp());
    idp.setRedirectUris([`${web.url}/v1/auth/oidc/callback`]);
    idp.accounts.set('alice', { email: 'alice@example.com', emailVerified: true, name: 'Alice Able' });
  });
  after(async () => {
    for (const b of browsers) await b.close().catch(() => undefined);
    await web?.stop();
    await h?.close();
    await idp?.close();
  });

  async function browser(): Promise<Browser> {
    const b = await launchChromium();
    browsers.push(b);
    return b;
  }

  /** A person invited with a role, who chose a password. */
  async function invited(role: Role, email: string) {
    const link = await createInviteLink(h.app.people, h.workspaceId, role, null);
    const res = await h.api.inject({
      method: 'POST',
      url: '/v1/auth/links/redeem',
      payload: { token: link.token, email, name: email.split('@')[0], password: PASSWORD },
    });
    assert.equal(res.statusCode, 200, res.body);
    const cookie = /verbatim_session=([^;]+)/.exec(String(res.headers['set-cookie']))![1]!;
    return {
      headers: {
        authorization: '',
        cookie: `verbatim_session=${cookie}`,
        'x-csrf-token': res.json().csrfToken,
      },
      userId: res.json().user.id as string,
    };
  }

  async function signInWithPassword(b: Browser, email: string) {
    await b.page.goto(`${web.url}/`);
    await b.page.getByLabel('Email').fill(email);
    await b.page.getByLabel('Password').fill(PASSWORD);
    await b.page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await b.page.getByTestId('signed-in-as').waitFor();
  }

  void it('U9/E7: signs in with single sign-on at the local OpenID provider in Chromium; the header names the person and their role; a member’s menu has no operator page', async () => {
    const { page } = await browser();
    await page.goto(`${web.url}/`);
    await page.getByRole('link', { name: 'Sign in with Example SSO' }).click();
    // The provider's own login page, on its own origin.
    await page.waitForURL((url) => url.origin === idp.issuer);
    await page.locator('input[name="login"]').fill('alice');
    await page.locator('input[name="password"]').fill('anything');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    // Back in the app, signed in by the session cookie the callback set.
    await page.waitForURL((url) => url.origin === web.url);
    assert.equal(await page.getByTestId('signed-in-as').textContent(), 'Alice Able · member');
    await page.getByRole('heading', { name: 'Meetings' }).waitFor();
    // A member has no Members or Operator page.
    assert.equal(await page.getByRole('link', { name: 'Members' }).count(), 0);
    assert.equal(await page.getByRole('link', { name: 'Operator' }).count(), 0);
  });

  void it('U9/E3: a viewer cannot delete, rename or correct a meeting; its owner shares it by a link that shows that one meeting, read-only, to someone signed in nowhere', async () => {
    const owner = await invited(Role.member, 'owner-of-notes@example.com');
    await invited(Role.viewer, 'watcher@example.com');
    const created = await h.request(
      'POST',
      '/v1/meetings',
      { source: 'upload', title: 'Client review' },
      owner.headers,
    );
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const put = await h.request('PUT', `/v1/meetings/${id}/recording`, speechWav(SPEECH), {
      ...owner.headers,
      'content-type': 'audio/wav',
    });
    assert.equal(put.status, 202, put.text);
    await waitForMeeting(h, id);
    const other = await h.request(
      'POST',
      '/v1/meetings',
      { source: 'upload', title: 'Another one' },
      owner.headers,
    );
    assert.equal(other.status, 201);

    // The viewer reads it, with no way to delete or share it.
    const viewer = await browser();
    await signInWithPassword(viewer, 'watcher@example.com');
    assert.equal(await viewer.page.getByTestId('signed-in-as').textContent(), 'watcher · viewer');
    await viewer.page.goto(`${web.url}/#/meetings/${id}`);
    await viewer.page.getByRole('heading', { name: 'Client review' }).waitFor();
    assert.equal(await viewer.page.getByTestId('visibility').textContent(), 'Workspace');
    await viewer.page.getByTestId('transcript').waitFor();
    for (const name of ['Delete…', 'Rename', 'Share…', 'Correct the text'])
      assert.equal(await viewer.page.getByRole('button', { name }).count(), 0, name);
    // And the server agrees, whatever the page shows: the viewer's own session is refused.
    const refused = await viewer.page.evaluate(async (meetingId) => {
      const session = (await (await fetch('/v1/auth/session')).json()) as { csrfToken: string };
      const res = await fetch(`/v1/meetings/${meetingId}`, {
        method: 'DELETE',
        headers: { 'x-csrf-token': session.csrfToken },
      });
      return res.status;
    }, id);
    assert.equal(refused, 403);

    // Its owner makes it private, then makes a read-only link.
    const ownerBrowser = await browser();
    await signInWithPassword(ownerBrowser, 'owner-of-notes@example.com');
    const { page } = ownerBrowser;
    await page.goto(`${web.url}/#/meetings/${id}`);
    await page.getByRole('heading', { name: 'Client review' }).waitFor();
    await page.getByRole('button', { name: 'Share…' }).click();
    await page.getByLabel('Only me (and admins)').check();
    await page.getByTestId('visibility').filter({ hasText: 'Private' }).waitFor();
    await page.getByRole('button', { name: 'Create a read-only link' }).click();
    const link = await page.getByLabel('Share link', { exact: true }).inputValue();
    assert.match(link, new RegExp(`^${web.url}/#/s/vsh_`));

    // Someone with no account opens it: the one meeting, its transcript, nothing else.
    const stranger = await browser();
    await stranger.page.goto(link);
    await stranger.page.getByRole('heading', { name: 'Client review' }).waitFor();
    await stranger.page.getByText('Shared with you, read-only').waitFor();
    const lines = await stranger.page.getByTestId('shared-transcript').locator('li').count();
    assert.ok(lines > 0, 'the transcript is shown');
    assert.equal(await stranger.page.getByRole('navigation').count(), 0, 'no way into the app');
    assert.equal(await stranger.page.getByText('Another one').count(), 0);
    // The viewer no longer sees the now private meeting.
    const hidden = await viewer.page.evaluate(
      async (meetingId) => (await fetch(`/v1/meetings/${meetingId}`)).status,
      id,
    );
    assert.equal(hidden, 404);

    // Revoked from the dialog, the link shows nothing.
    await page.getByRole('button', { name: 'Revoke' }).click();
    // The link's own "revoked" mark (the dialog also says links last "until revoked").
    await page.getByText('revoked', { exact: true }).waitFor();
    await stranger.page.reload();
    await stranger.page
      .getByRole('alert')
      .filter({ hasText: 'unknown, was revoked, or has expired' })
      .waitFor();
  });

  void it('E6: the members page, a join link and a share link pass axe-core at 1280×800 and 390×844', async () => {
    const created = await h.request('POST', '/v1/meetings', { source: 'upload', title: 'Read by link' });
    const id = created.json.id as string;
    const put = await h.request('PUT', `/v1/meetings/${id}/recording`, speechWav(SPEECH), {
      'content-type': 'audio/wav',
    });
    assert.equal(put.status, 202, put.text);
    await waitForMeeting(h, id);
    const shared = await h.request('POST', `/v1/meetings/${id}/share-links`, {});
    assert.equal(shared.status, 201, shared.text);
    const invite = await createInviteLink(h.app.people, h.workspaceId, Role.member, null);

    await invited(Role.admin, 'runs-it@example.com');
    const admin = await browser();
    await signInWithPassword(admin, 'runs-it@example.com');
    const stranger = await browser();
    for (const size of VIEWPORTS) {
      await admin.page.setViewportSize({ width: size.width, height: size.height });
      await admin.page.goto(`${web.url}/#/members`);
      await admin.page.getByRole('heading', { name: 'Members', level: 1 }).waitFor();
      await admin.page.getByTestId('privacy-promise').waitFor();
      await assertAccessible(admin.page, `members page at ${size.name}`);
      await screenshot(admin.page, `web-e6-members-${size.name}`);

      await stranger.page.setViewportSize({ width: size.width, height: size.height });
      await stranger.page.goto(`${web.url}/#/join/${invite.token}`);
      await stranger.page.getByRole('heading', { name: 'Join Verbatim' }).waitFor();
      await assertAccessible(stranger.page, `join page at ${size.name}`);
      await screenshot(stranger.page, `web-e6-join-${size.name}`);

      await stranger.page.goto(`${web.url}${shared.json.path as string}`);
      await stranger.page.getByTestId('shared-transcript').locator('li').first().waitFor();
      await assertAccessible(stranger.page, `shared meeting at ${size.name}`);
      await screenshot(stranger.page, `web-e6-shared-${size.name}`);
    }
  });
});
