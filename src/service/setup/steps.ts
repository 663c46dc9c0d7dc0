// The spec's setup steps before the agent runs, as commands to copy: each target's own, from its
// definition (src/agent/targets/<name>/setup.ts), whose permission documents are the ones
// `tuner-agent permissions` prints, so that the page and the agent cannot drift apart. What only
// the operator knows stays a <PLACEHOLDER>, spelled as in agent.yaml.
import { TARGETS, type TargetRegistry } from '../../agent/targets/registry.ts';
import { DATABASE_SQL, type SetupStep } from '../../target/setup.ts';

export { DATABASE_SQL, type SetupStep };

/** The steps before agent.yaml, in the order they are done. */
export function prerequisiteSteps(target: string, databaseId: string, registry: TargetRegistry = TARGETS): SetupStep[] {
  const setup = registry.infoOf(target).setup;
  // A target without steps of its own: the database's side, which every target needs.
  return setup?.steps(databaseId) ?? [{ id: 'database-sql', title: 'On the database, as a superuser', note: '', text: DATABASE_SQL }];
}
