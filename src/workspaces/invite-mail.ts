import { createTransport, type Transporter } from 'nodemailer';
import type { Logger } from '../log.ts';

/** U9: the settings of email invites (VERBATIM_SMTP_URL, VERBATIM_SMTP_FROM, VERBATIM_PUBLIC_URL). */
export interface MailSettings {
  smtpUrl: string | null;
  from: string;
  publicUrl: string | null;
  timeoutMs: number;
}

export type MailOutcome = { sent: true } | { sent: false; reason: string };

/**
 * U9: sends an invite link by email through the operator's SMTP server, when one is set; without
 * one, invites are links to copy. The link is the web app's `#/join/<token>` page on the
 * installation's public address. A server that refuses or cannot be reached is said in a reason
 * that names neither the server's credentials nor the token; the invite stays valid either way.
 */
export class InviteMailer {
  private readonly transport: Transporter | null;

  constructor(
    private readonly settings: MailSettings,
    private readonly log: Logger,
  ) {
    this.transport = settings.smtpUrl
      ? createTransport({
          url: settings.smtpUrl,
          connectionTimeout: settings.timeoutMs,
          greetingTimeout: settings.timeoutMs,
          socketTimeout: settings.timeoutMs,
        })
      : null;
  }

  get enabled(): boolean {
    return this.transport !== null;
  }

  /** The invite page for `token`, on the public address (or the one the request came to). */
  joinUrl(token: string, requestOrigin: string): string {
    const origin = (this.settings.publicUrl ?? requestOrigin).replace(/\/+$/, '');
    return `${origin}/#/join/${token}`;
  }

  async sendInvite(
    to: string,
    link: string,
    invite: { role: string; workspace: string },
  ): Promise<MailOutcome> {
    if (!this.transport) return { sent: false, reason: 'email invites are off (no VERBATIM_SMTP_URL)' };
    const article = /^[aeiou]/.test(invite.role) ? 'an' : 'a';
    try {
      await this.transport.sendMail({
        from: this.settings.from,
        to,
        subject: `You are invited to ${invite.workspace} on Verbatim`,
        text: [
          `You are invited to join ${invite.workspace} on Verbatim as ${article} ${invite.role}.`,
          '',
          `Open this link to set your password and join (it works once):`,
          link,
          '',
          'If you did not expect this, ignore this email.',
        ].join('\n'),
      });
      return { sent: true };
    } catch (err) {
      // nodemailer's errors name the server's reply; never the URL (it holds the credentials).
      const code = (err as { code?: unknown }).code;
      const responseCode = (err as { responseCode?: unknown }).responseCode;
      const reason =
        typeof responseCode === 'number'
          ? `the mail server refused the message (${responseCode})`
          : `the mail server could not be reached (${typeof code === 'string' ? code : 'error'})`;
      this.log.warn({ reason }, 'an invite email was not sent');
      return { sent: false, reason };
    }
  }

  close(): void {
    this.transport?.close();
  }
}
