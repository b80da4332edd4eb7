"""Installing, pure: text in, text out for ``install-hooks`` and ``install-service``.

:mod:`.config_edit` (merging paneward's entries into an agent's config), :mod:`.forwarder_js`
(the OpenCode plugin's and Pi extension's JavaScript), :mod:`.service` (the systemd user unit
and the tmux autostart line).
"""
