"""Routing: many models over many nodes (`RoutedUpstream`, the `Completions` upstream that
chooses a tier and a node per request; `config` is what it is built from)."""
