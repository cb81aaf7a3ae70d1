"""One module per framework; each defines ``Adapter``. Framework imports happen in ``setup()`` only."""
