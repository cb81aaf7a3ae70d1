"""storage: the results database, SQLite by default or PostgreSQL, laid out by schema.sql.

    db.py             Database: open (create, upgrade, or refuse with what to do), its tables
    sqlite_schema.py  whose SQLite file it is, and its version
    postgres.py       the schema translated for PostgreSQL, and its version row
    migrate.py        an older database brought up to schema.sql where the difference is additions

May import: text, config. What is written into it is the sweep's business (sweep/recording.py);
what is read out, the report's.
"""
