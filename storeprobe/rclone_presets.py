"""rclone's S3 provider presets, as data: the endpoint of a provider's region, and the fix
where rclone's configuration needs an endpoint it cannot know.

rclone writes a remote's ``endpoint`` into its configuration when ``rclone config`` asks
for it; a remote written by hand (or by ``rclone config create NAME s3 provider=Wasabi
region=...``) may name only a provider and a region. For the providers whose preset lists
exactly one endpoint per region, :data:`S3_REGION_ENDPOINTS` holds that list, copied
from rclone's provider files (``rclone/rclone: backend/s3/provider/<Provider>.yaml``,
its ``endpoint:`` entries; Wasabi's and DigitalOcean's name the region inside the host,
Scaleway's list the regions beside them). rclone adds ``https://`` to an endpoint
written without a scheme (``backend/s3/s3.go``, ``s3Connection``); so does storeprobe.

For providers whose endpoint depends on the account, :data:`S3_ENDPOINT_FIXES` says what
to write (from rclone's ``docs/content/s3.md``).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEFAULT_S3_REGION", "S3_ENDPOINT_FIXES", "S3_REGION_ENDPOINTS", "UNMAPPED_TYPES"]

#: the region rclone signs with when a remote sets none (``backend/s3/s3.go``)
DEFAULT_S3_REGION = "us-east-1"

#: provider → region → endpoint (without a scheme), from rclone's provider presets
S3_REGION_ENDPOINTS: Mapping[str, Mapping[str, str]] = {
    "Wasabi": {
        "us-east-1": "s3.wasabisys.com",
        "us-east-2": "s3.us-east-2.wasabisys.com",
        "us-central-1": "s3.us-central-1.wasabisys.com",
        "us-west-1": "s3.us-west-1.wasabisys.com",
        "ca-central-1": "s3.ca-central-1.wasabisys.com",
        "eu-central-1": "s3.eu-central-1.wasabisys.com",
        "eu-central-2": "s3.eu-central-2.wasabisys.com",
        "eu-west-1": "s3.eu-west-1.wasabisys.com",
        "eu-west-2": "s3.eu-west-2.wasabisys.com",
        "eu-south-1": "s3.eu-south-1.wasabisys.com",
        "ap-northeast-1": "s3.ap-northeast-1.wasabisys.com",
        "ap-northeast-2": "s3.ap-northeast-2.wasabisys.com",
        "ap-southeast-1": "s3.ap-southeast-1.wasabisys.com",
        "ap-southeast-2": "s3.ap-southeast-2.wasabisys.com",
    },
    "DigitalOcean": {
        "syd1": "syd1.digitaloceanspaces.com",
        "sfo3": "sfo3.digitaloceanspaces.com",
        "sfo2": "sfo2.digitaloceanspaces.com",
        "fra1": "fra1.digitaloceanspaces.com",
        "nyc3": "nyc3.digitaloceanspaces.com",
        "ams3": "ams3.digitaloceanspaces.com",
        "sgp1": "sgp1.digitaloceanspaces.com",
        "lon1": "lon1.digitaloceanspaces.com",
        "tor1": "tor1.digitaloceanspaces.com",
        "blr1": "blr1.digitaloceanspaces.com",
    },
    "Scaleway": {
        "nl-ams": "s3.nl-ams.scw.cloud",
        "fr-par": "s3.fr-par.scw.cloud",
        "pl-waw": "s3.pl-waw.scw.cloud",
    },
}

#: provider → what to add to a remote that has no endpoint (its endpoint is per account)
S3_ENDPOINT_FIXES: Mapping[str, str] = {
    "Cloudflare": "endpoint = https://ACCOUNT_ID.r2.cloudflarestorage.com (the account ID "
    "shown on Cloudflare's R2 page)",
    "IDrive": "endpoint = the endpoint IDrive e2 shows for the access key, e.g. "
    "q9d9.la12.idrivee2-5.com (rclone asks IDrive's web API for it; storeprobe sends no "
    "request but the probe's own)",
}

#: rclone types storeprobe does not open, and what to use instead
UNMAPPED_TYPES: Mapping[str, str] = {
    "b2": "storeprobe measures Backblaze B2 through its S3-compatible API: make an s3 "
    "remote with provider = Other, endpoint = https://s3.REGION.backblazeb2.com (the "
    "region from the bucket's endpoint, e.g. us-west-004), region = REGION, "
    "access_key_id = the application key's ID, secret_access_key = the application key",
    "crypt": "a crypt remote encrypts another remote: probe the remote it wraps (its "
    "'remote' option) instead",
}
