"""Demo models: tiny real-architecture models built locally and cached, never downloaded."""
