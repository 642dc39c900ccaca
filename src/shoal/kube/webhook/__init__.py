"""shoal's admission webhook (`shoal webhook`): validating and mutating pods and PodGroups over TLS.

* `certs` — self-signed serving certificates (cryptography) and their rotation;
* `server` — the HTTPS endpoint (AdmissionReview v1), the queue and namespace informers it reads.
The rules themselves are pure: `shoal.kai.admission`.
"""
