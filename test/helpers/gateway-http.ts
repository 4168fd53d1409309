import type { SessionEntry } from '../../src/sessions/entry.ts';
import type { TranscriptMessage } from '../../src/sessions/transcript.ts';

/** The HTTP routes a test reads a running gateway through. */
export function gatewayHttp(url: () => string) {
  const key = (k: string) => encodeURIComponent(k);
  return {
    /** `POST /webchat/messages`. */
    webchat: (user: string, text: string) => fetch(`${url()}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user, text }) }),
    /** The web chat's reply text. */
    async say(user: string, text: string): Promise<string> {
      return ((await (await this.webchat(user, text)).json()) as { reply: string }).reply;
    },
    entry: async (k: string) => (await (await fetch(`${url()}/admin/sessions/${key(k)}`)).json()) as SessionEntry & { tokenBudget?: { used: number; budget: number } },
    history: async (k: string) => ((await (await fetch(`${url()}/admin/sessions/${key(k)}/history`)).json()) as { entries: TranscriptMessage[] }).entries,
    /** One sample of `GET /metrics`, by its exact name and labels; 0 when absent. */
    async metric(line: string): Promise<number> {
      const text = await (await fetch(`${url()}/metrics`)).text();
      const found = text.split('\n').find((l) => l.startsWith(line));
      return found ? Number(found.slice(line.length).trim()) : 0;
    },
  };
}
