"""Test configuration: hypothesis profiles (CI runs the default, bounded one)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("AMANDA_HYPOTHESIS_PROFILE", "default"))
