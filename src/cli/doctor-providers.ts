import type { ResolvedConfig, ResolvedProvider } from '../config/resolved.ts';
import { ProviderError } from '../core/errors.ts';
import { createProvider, keysOf } from '../providers/registry.ts';
import type { Provider } from '../providers/types.ts';
import type { Check } from './doctor-check.ts';

/** How long one probe call may take. */
const PROBE_TIMEOUT_MS = 10_000;

/** Options of {@link checkProviders}. */
export interface ProviderProbeOptions {
  /** Also make a 1-token completion on each provider's model (costs a request; `doctor --completion`). */
  completion?: boolean;
  /** Builds the provider of one key (tests). */
  create?: (p: ResolvedProvider, apiKey: string) => Provider;
}

/**
 * `switchboard doctor`'s provider lines (SPEC §18): each configured provider, through its own client, asked for
 * its model list with each of its keys (a cheap call), the configured models looked up in it, and with
 * `completion` a 1-token completion on its model. A key is named by its place (`key 2`), never shown.
 */
export async function checkProviders(config: Pick<ResolvedConfig, 'providers'>, options: ProviderProbeOptions = {}): Promise<Check[]> {
  return Promise.all(Object.values(config.providers).map((p) => checkProvider(p, options)));
}

async function checkProvider(p: ResolvedProvider, options: ProviderProbeOptions): Promise<Check> {
  const name = `provider ${p.id}`;
  if (p.kind === 'offline') return { name, ok: 'warn', detail: 'offline (no OPENAI_API_KEY or OPENAI_BASE_URL): replies are echoes; set one of them to use a model' };
  const where = `${p.kind} ${p.baseUrl || (p.kind === 'anthropic' ? 'api.anthropic.com' : 'api.openai.com')}`;
  const keys = keysOf(p);
  const create = options.create ?? createProvider;
  const probes = await Promise.all((keys.length ? keys : ['']).map((key) => probeKey(create(p, key), p, options.completion === true)));
  const failed = probes.map((r, i) => ({ ...r, key: i + 1 })).filter((r) => r.problem);
  const keyName = (i: number) => (keys.length > 1 ? `key ${i}` : 'the key');
  if (failed.length === probes.length) {
    const first = failed[0] as { problem: string; key: number };
    return { name, ok: false, detail: `${where}: ${keys.length > 1 ? `every key failed; ${keyName(first.key)}: ` : ''}${first.problem}` };
  }
  const models = probes.find((r) => r.models)?.models;
  const wanted = [p.model, ...p.models];
  const missing = models ? wanted.filter((m) => !models.includes(m)) : [];
  const parts: string[] = [`${where} answers`];
  if (keys.length > 1) parts.push(`${keys.length - failed.length} of ${keys.length} keys work${failed.length ? ` (${failed.map((f) => `${keyName(f.key)}: ${f.problem}`).join('; ')})` : ''}`);
  if (!models) parts.push(`it lists no models, so ${wanted.join(', ')} could not be checked`);
  else if (missing.length) parts.push(`not among its ${models.length} models: ${missing.join(', ')} (it has ${models.slice(0, 5).join(', ')}${models.length > 5 ? ', …' : ''}); fix providers.${p.id}.model / models`);
  else parts.push(`${wanted.length === 1 ? `model ${p.model} is` : `models ${wanted.join(', ')} are`} available`);
  const completed = probes.find((r) => r.completed !== undefined)?.completed;
  if (completed) parts.push(`a 1-token completion on ${p.model} answered in ${completed} ms`);
  return { name, ok: failed.length || missing.length || !models ? (missing.length ? false : 'warn') : true, detail: parts.join('; ') };
}

/** One key's answers: its model list, and the completion's time when asked; a problem when it failed. */
async function probeKey(provider: Provider, p: ResolvedProvider, completion: boolean): Promise<{ models?: string[]; completed?: number; problem?: string }> {
  const out: { models?: string[]; completed?: number; problem?: string } = {};
  try {
    const models = await provider.listModels?.(AbortSignal.timeout(PROBE_TIMEOUT_MS));
    if (models?.length) out.models = models;
  } catch (error) {
    // A server without a model list (some compatible ones) may still answer completions.
    if (!(error instanceof ProviderError && error.providerStatus === 404)) return { problem: describe(error, p) };
  }
  if (completion) {
    const t0 = performance.now();
    try {
      await provider.complete(
        { model: p.model, messages: [{ role: 'user', content: 'Say OK.' }], maxTokens: 1, correlationId: `doctor-${Date.now()}` },
        { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS), maxRetries: 0 },
      );
      out.completed = Math.round(performance.now() - t0);
    } catch (error) {
      return { ...out, problem: `the completion failed: ${describe(error, p)}` };
    }
  }
  return out;
}

function describe(error: unknown, p: ResolvedProvider): string {
  if (!(error instanceof ProviderError)) return (error as Error).message;
  switch (error.code) {
    case 'PROVIDER_AUTH': return `it refused the key (HTTP ${error.providerStatus ?? '?'}): check ${p.id === 'default' ? 'OPENAI_API_KEY' : `providers.${p.id}.apiKey / apiKeys`}`;
    case 'PROVIDER_UNAVAILABLE': return `it is unreachable: is the server up? Check ${p.id === 'default' ? 'OPENAI_BASE_URL' : `providers.${p.id}.baseUrl`} and the network`;
    case 'PROVIDER_TIMEOUT': return `it did not answer within ${PROBE_TIMEOUT_MS / 1000} s`;
    case 'PROVIDER_RATE_LIMITED': return 'it is rate limiting this key right now (HTTP 429)';
    case 'PROVIDER_OVERLOADED': return 'it is overloaded right now; try again later';
    default: return error.message;
  }
}
