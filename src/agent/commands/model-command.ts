import { configuredModels } from '../../config/model-refs.ts';
import type { ResolvedConfig } from '../../config/resolved.ts';
import { didYouMean } from '../../core/did-you-mean.ts';
import { plural } from '../../core/plural.ts';
import type { ChatCommand } from './commands.ts';

/** How many configured models a refusal lists before "…". */
const LISTED = 12;

/**
 * The configured model `wanted` names: `"<provider>/<model>"` exactly, or a bare model name that exactly one
 * provider serves (the agent's own provider first when several do). Undefined when none matches.
 */
export function matchConfiguredModel(wanted: string, config: Pick<ResolvedConfig, 'providers'>, ownProviderId: string): string | undefined {
  const all = configuredModels(config.providers);
  if (all.includes(wanted)) return wanted;
  const bare = all.filter((ref) => ref.slice(ref.indexOf('/') + 1) === wanted);
  if (bare.length === 1) return bare[0];
  return bare.find((ref) => ref === `${ownProviderId}/${wanted}`);
}

/**
 * `/model` (SPEC §18): without arguments it shows the session's model, whether it was chosen or is the agent's
 * (with its fallbacks), and what is configured; `/model <provider/model>` sets a per-session choice, stored
 * with the session, refused with the list when it is not configured; `/model default` goes back to the agent's.
 */
export const modelCommand: ChatCommand = {
  name: 'model',
  description: 'show or set the model of this session',
  usage: '/model [provider/model|default]',
  async run({ session, args, services }) {
    const e = session.entry;
    const all = configuredModels(services.config.providers);
    const listed = `${all.slice(0, LISTED).join(', ')}${all.length > LISTED ? ', …' : ''}`;
    const wanted = args.trim();
    if (!wanted) {
      const now = services.modelOf(e);
      const how = now.userChosen ? 'chosen with /model; it does not fall back' : `the agent's${now.fallbacks.length ? `; fallbacks: ${now.fallbacks.join(', ')}` : ''}`;
      return `Model: ${now.ref} (${how}). Configured: ${listed}. Change it with /model <provider/model>, or /model default.`;
    }
    if (wanted === 'default') {
      e.overrides = { ...e.overrides, model: undefined };
      await services.save(e);
      return `Model set to ${services.modelOf(e).ref}, the agent's.`;
    }
    const ref = matchConfiguredModel(wanted, services.config, services.modelOf(e).providerId);
    if (!ref) {
      const guess = didYouMean(wanted, [...all, ...all.map((r) => r.slice(r.indexOf('/') + 1))]);
      return `Model "${wanted}" is not configured${guess ? ` (did you mean "${guess}"?)` : ''}; nothing changed. ${plural(all.length, 'model is', 'models are')} configured: ${listed}.`;
    }
    e.overrides = { ...e.overrides, model: ref };
    await services.save(e);
    return `Model set to ${ref} for this conversation. It does not fall back to other models; /model default goes back to the agent's.`;
  },
};
