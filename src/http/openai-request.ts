import type { AgentConfig } from '../config/resolved.ts';
import type { TokenUsage, TurnResult } from '../core/channel-adapter.ts';
import { BadRequestError } from '../core/errors.ts';
import { outboundText } from '../core/message.ts';
import { parseSessionKey } from '../routing/session-key.ts';
import { z } from 'zod';

const imageUrl = z.union([z.string(), z.looseObject({ url: z.string(), detail: z.string().nullish() })]);
const contentPart = z.looseObject({ type: z.string(), text: z.string().optional(), image_url: imageUrl.nullish() });
const requestMessage = z.looseObject({
  role: z.string(),
  content: z.union([z.string(), z.array(contentPart), z.null()]).optional(),
});
const completionRequest = z.looseObject({
  model: z.string().optional(),
  messages: z.array(requestMessage).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  user: z.string().nullish(),
});
/** A `POST /v1/chat/completions` body, as far as we read it. */
export type CompletionRequest = z.infer<typeof completionRequest>;

/** OpenAI's `usage`: prompt tokens include the cached ones, as OpenAI counts them. */
export function openAIUsage(u: TokenUsage): Record<string, unknown> {
  const prompt = u.inputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  const details = u.cacheReadTokens || u.cacheWriteTokens
    ? { prompt_tokens_details: { cached_tokens: u.cacheReadTokens, ...(u.cacheWriteTokens ? { cache_write_tokens: u.cacheWriteTokens } : {}) } }
    : {};
  return { prompt_tokens: prompt, completion_tokens: u.outputTokens, total_tokens: prompt + u.outputTokens, ...details };
}

/** The agent a request's `model` names: an agent id (also `switchboard/<id>`, `agent:<id>`), an agent's model (bare or `<provider>/<model>`), else the default agent. */
export function agentForModel(agents: readonly AgentConfig[], model: string | undefined): AgentConfig | undefined {
  if (!model?.trim()) return agents[0];
  const name = model.trim().toLowerCase().replace(/^(switchboard[/:]|agent:)/, '');
  const wanted = model.trim().toLowerCase();
  return agents.find((a) => a.id === name) ?? agents.find((a) => a.model.toLowerCase() === wanted || `${a.providerId}/${a.model}`.toLowerCase() === wanted);
}

/**
 * What `GET /v1/models` may list: exactly the names {@link agentForModel} routes, the agents by id, then each
 * distinct model an agent is configured with (answered by the first agent using it). A provider's default model
 * that no agent uses is not listed: asking for it would be a 404.
 */
export function routableModels(agents: readonly AgentConfig[]): { id: string; agent: AgentConfig; kind: 'agent' | 'model' }[] {
  const seen = new Set<string>();
  const list: { id: string; agent: AgentConfig; kind: 'agent' | 'model' }[] = [];
  for (const agent of agents) {
    seen.add(agent.id.toLowerCase());
    list.push({ id: agent.id, agent, kind: 'agent' });
  }
  for (const agent of agents) {
    if (seen.has(agent.model.toLowerCase())) continue;
    seen.add(agent.model.toLowerCase());
    list.push({ id: agent.model, agent, kind: 'model' });
  }
  return list;
}

export function textOf(content: CompletionRequest['messages'][number]['content']): string {
  if (typeof content === 'string') return content;
  if (!content) return '';
  return content.filter((p) => (p.type === 'text' || p.type === 'input_text') && typeof p.text === 'string').map((p) => p.text).join('\n');
}

/** Longest `https:` image URL passed through. */
const MAX_URL_CHARS = 8192;

/** An image of a user message: stored bytes from a `data:` URL, or an `https:` URL the model fetches itself. */
export type RequestImage =
  | { kind: 'data'; mime: string; dataBase64: string; field: string }
  | { kind: 'url'; url: string };

/**
 * The images of a message's content: `image_url` parts (`{ url }` or the URL itself; `input_image` too), each a
 * `data:<image mime>;base64,…` URL or an `https://` URL. Any other scheme, a data URL that is not base64 or
 * not an image, or a part without a URL is a 400 that names the part.
 */
export function imagesOf(content: CompletionRequest['messages'][number]['content'], where = 'messages'): RequestImage[] {
  if (!Array.isArray(content)) return [];
  const images: RequestImage[] = [];
  content.forEach((part, i) => {
    if (part.type !== 'image_url' && part.type !== 'input_image') return;
    const field = `${where}.content[${i}].image_url`;
    const url = typeof part.image_url === 'string' ? part.image_url : part.image_url?.url;
    if (!url) throw new BadRequestError(`Missing required parameter: '${field}.url'.`, 'missing_required_parameter');
    images.push(classifyImageUrl(url, field));
  });
  return images;
}

function classifyImageUrl(url: string, field: string): RequestImage {
  const scheme = /^([a-z][a-z0-9+.-]{0,31}):/i.exec(url.slice(0, 40))?.[1]?.toLowerCase();
  if (scheme === 'data') {
    // The header only: the payload may be megabytes.
    const comma = url.indexOf(',', 0);
    const header = comma > 0 && comma <= 256 ? url.slice(5, comma).toLowerCase() : undefined;
    const params = header?.split(';').map((p) => p.trim());
    if (!params || params.at(-1) !== 'base64') throw new BadRequestError(`Invalid '${field}': a data URL must be data:<mime>;base64,<data>.`, 'invalid_image_url');
    const mime = params[0] ?? '';
    if (!/^image\/[\w.+-]+$/.test(mime)) throw new BadRequestError(`Invalid '${field}': "${mime.slice(0, 60)}" is not an image type (image/png, image/jpeg...).`, 'invalid_image_url');
    return { kind: 'data', mime, dataBase64: url.slice(comma + 1), field };
  }
  if (scheme === 'https') {
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch { /* below */ }
    if (!parsed || url.length > MAX_URL_CHARS || !parsed.hostname) throw new BadRequestError(`Invalid '${field}': not a usable https URL (at most ${MAX_URL_CHARS} characters).`, 'invalid_image_url');
    return { kind: 'url', url: parsed.href };
  }
  throw new BadRequestError(`Invalid '${field}': only data: (base64) and https: image URLs are taken${scheme ? `, not ${scheme}:` : ''}.`, 'invalid_image_url');
}

/** Validates a request body; a bad one is a 400 in OpenAI's words. */
export function parseRequest(raw: unknown): CompletionRequest {
  const parsed = completionRequest.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join('.') || 'body';
    const missing = issue?.code === 'invalid_type' && /received undefined/.test(issue.message);
    throw new BadRequestError(missing ? `Missing required parameter: '${where}'.` : `Invalid '${where}': ${issue?.message ?? 'bad value'}.`, missing ? 'missing_required_parameter' : 'invalid_value');
  }
  return parsed.data;
}

/** Who the call talks as: a stable session name (`X-Session-Key` or `user`), or a one-off session. */
export function sessionOf(header: string | undefined, user: string | null | undefined): { name: string; agentId?: string } | undefined {
  const given = header?.trim() || user?.trim();
  if (!given) return undefined;
  if (given.length > 200 || /[\u0000-\u001f\u007f]/.test(given)) {
    throw new BadRequestError('X-Session-Key (or "user") must be 1-200 printable characters.', 'invalid_session_key');
  }
  if (given.toLowerCase().startsWith('agent:')) {
    // A full key, as answered in the X-Session-Key response header.
    let parsed;
    try {
      parsed = parseSessionKey(given);
    } catch (error) {
      throw new BadRequestError((error as Error).message, 'invalid_session_key');
    }
    if (parsed.channel !== 'api' || parsed.chatType !== 'direct' || !parsed.peerId || parsed.dmScope !== 'per-channel-peer' || parsed.threadId) {
      throw new BadRequestError(`${parsed.key} is not an API session key (agent:<agentId>:api:direct:<name>); send just the name.`, 'invalid_session_key');
    }
    return { name: parsed.peerId, agentId: parsed.agentId };
  }
  return { name: given };
}

/** An HTTP error answer. */
export interface Failure {
  status: number;
  message: string;
  code: string;
}

/** Maps a turn that did not reply to an OpenAI-style error. */
export function failureOf(result: TurnResult | undefined, llmError: string | undefined, closing: boolean, correlationId: string): Failure {
  const ref = ` (correlation id ${correlationId})`;
  if (result?.outcome === 'stopped') {
    return closing
      ? { status: 503, message: 'The gateway is shutting down; try again once it is back.', code: 'shutting_down' }
      : { status: 499, message: `The request was cancelled${ref}.`, code: 'request_cancelled' };
  }
  switch (llmError) {
    case 'PROVIDER_RATE_LIMITED': return { status: 429, message: `The model provider is rate limiting; retry later${ref}.`, code: 'rate_limit_exceeded' };
    case 'CONTEXT_OVERFLOW': return { status: 400, message: `The conversation does not fit the model's context window${ref}.`, code: 'context_length_exceeded' };
    case undefined: return { status: 500, message: `The agent could not answer; see the gateway log${ref}.`, code: 'internal_error' };
    default: return { status: 502, message: `The model provider failed (${llmError}); see the gateway log${ref}.`, code: llmError.toLowerCase() };
  }
}

/** The reply text of a turn: every reply, notices first. */
export const replyOf = (result: TurnResult): string => result.replies.map(outboundText).join('\n\n');
