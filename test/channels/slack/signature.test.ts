import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SLACK_MAX_SKEW_SECONDS, signSlackRequest, verifySlackSignature } from '../../../channels/slack/signature.ts';

/** Slack's own example request ("Verifying requests from Slack"), with the signature Slack publishes for it. */
const SLACK_EXAMPLE = {
  signingSecret: '8f742231b10e8888abcd99yyyzzz85a5',
  timestamp: '1531420618',
  rawBody: 'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c',
  signature: 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503',
};

/** Signed here with node:crypto, independently of the code under test. */
function sign(secret: string, timestamp: string, body: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
}

describe('verifySlackSignature', () => {
  const secret = 'shhh-secret';
  const now = 1_700_000_000_000;
  const ts = '1700000000';
  const body = '{"type":"event_callback"}';
  const good = 'v0=fe18867b4a3f9ec837e44efda84752d6554bdd141ed095f678daa14cf14cd741';
  const check = (over: Partial<Parameters<typeof verifySlackSignature>[0]> = {}) =>
    verifySlackSignature({ signingSecret: secret, rawBody: body, timestamp: ts, signature: good, nowMs: now, ...over });

  it("accepts Slack's published example at its own time", () => {
    expect(verifySlackSignature({ ...SLACK_EXAMPLE, nowMs: Number(SLACK_EXAMPLE.timestamp) * 1000 + 10_000 })).toEqual({ ok: true });
  });

  it('accepts a body signed with the secret (fixed vector, and signed by node:crypto)', () => {
    expect(good).toBe(sign(secret, ts, body));
    expect(check()).toEqual({ ok: true });
    expect(check({ rawBody: 'ünïcödé ✓', signature: sign(secret, ts, 'ünïcödé ✓') })).toEqual({ ok: true });
  });

  it('refuses a wrong secret, a changed body, another timestamp in the base string, a wrong version', () => {
    expect(check({ signature: sign('other', ts, body) })).toEqual({ ok: false, reason: 'bad signature' });
    expect(check({ rawBody: `${body} ` })).toEqual({ ok: false, reason: 'bad signature' });
    expect(check({ signature: sign(secret, '1700000001', body) })).toEqual({ ok: false, reason: 'bad signature' });
    expect(check({ signature: good.replace('v0=', 'v1=') })).toEqual({ ok: false, reason: 'bad signature' });
    expect(check({ signature: good.slice(0, -1) })).toEqual({ ok: false, reason: 'bad signature' });
    expect(check({ signingSecret: 'shhh-secreT' })).toEqual({ ok: false, reason: 'bad signature' });
  });

  it('accepts a timestamp up to 5 minutes old or ahead, and refuses one beyond', () => {
    expect(SLACK_MAX_SKEW_SECONDS).toBe(300);
    const at = (seconds: number) => check({ timestamp: String(seconds), signature: sign(secret, String(seconds), body) });
    expect(at(1_700_000_000 - 300)).toEqual({ ok: true });
    expect(at(1_700_000_000 - 301)).toEqual({ ok: false, reason: 'stale timestamp' });
    expect(at(1_700_000_000 + 300)).toEqual({ ok: true });
    expect(at(1_700_000_000 + 301)).toEqual({ ok: false, reason: 'stale timestamp' });
    expect(check({ nowMs: now + 301_000 })).toEqual({ ok: false, reason: 'stale timestamp' });
    expect(check({ nowMs: now - 301_000 })).toEqual({ ok: false, reason: 'stale timestamp' });
  });

  it('a timestamp far ahead is refused before anything else, even when the signature is wrong', () => {
    expect(check({ timestamp: '1700000400', signature: 'v0=00' })).toEqual({ ok: false, reason: 'stale timestamp' });
  });

  it.each([
    ['no timestamp', { timestamp: null }],
    ['an empty timestamp', { timestamp: '' }],
    ['a timestamp that is not digits', { timestamp: '1700000000.5' }],
    ['a negative timestamp', { timestamp: '-1700000000' }],
    ['a timestamp with text after it', { timestamp: '1700000000abc' }],
    ['no signature', { signature: null }],
    ['an empty signature', { signature: '' }],
    ['no signing secret', { signingSecret: '' }],
  ])('refuses %s as missing headers', (_name, over) => {
    expect(check(over)).toEqual({ ok: false, reason: 'missing headers' });
  });
});

describe('signSlackRequest', () => {
  it("gives Slack's published signature for its example", () => {
    expect(signSlackRequest(SLACK_EXAMPLE.signingSecret, SLACK_EXAMPLE.timestamp, SLACK_EXAMPLE.rawBody)).toBe(SLACK_EXAMPLE.signature);
  });
});
