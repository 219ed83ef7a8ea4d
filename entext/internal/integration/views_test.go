package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/entext/internal/integration/views"
	"github.com/entflake/entflake/entext/internal/integration/views/accountsummary"
	viewschema "github.com/entflake/entflake/entext/internal/integration/views/schema"
	"github.com/entflake/entflake/internal/dbtest"
)

// TestViewJSONString: a view (ent.View) with fields marked
// entflakemixin.JSONString() is generated with the extension (the package
// views compiles: the extension registers no hook for a view, which has no
// mutation), and its rows, read through the
// generated client, marshal every marked field as a JSON string and decode
// back from the string or from a number, on each database.
func TestViewJSONString(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		ctx := context.Background()
		db, drv, g := lease(t, b)
		client := views.NewClient(views.Driver(drv), views.IDGenerator(g))
		require.NoError(t, client.Schema.Create(ctx))
		_, err := db.Exec("CREATE VIEW account_summaries AS " + viewschema.AccountSummaryQuery)
		require.NoError(t, err)
		owner := client.Account.Create().SetName("owner").SaveX(ctx)
		mine(t, g, owner.ID)
		a := client.Account.Create().SetName("a").SetOwnerID(owner.ID).SaveX(ctx)
		mine(t, g, a.ID)
		client.Transfer.Create().SetAccountID(a.ID).SaveX(ctx)

		s := client.AccountSummary.Query().Where(accountsummary.Name("a")).OnlyX(ctx)
		require.Equal(t, a.ID, s.ID)
		require.Equal(t, a.ID, s.AccountID)
		require.NotNil(t, s.OwnerID)
		require.Equal(t, owner.ID, *s.OwnerID)
		out, err := json.Marshal(s)
		require.NoError(t, err)
		assert.JSONEq(t, fmt.Sprintf(`{"id":"%d","account_id":"%d","name":"a","owner_id":"%d"}`, a.ID, a.ID, owner.ID), string(out))

		for _, in := range []string{
			string(out),
			fmt.Sprintf(`{"id":%d,"account_id":%d,"name":"a","owner_id":%d}`, a.ID, a.ID, owner.ID),
		} {
			var back views.AccountSummary
			require.NoError(t, json.Unmarshal([]byte(in), &back), in)
			assert.Equal(t, s.ID, back.ID, in)
			assert.Equal(t, s.AccountID, back.AccountID, in)
			assert.Equal(t, *s.OwnerID, *back.OwnerID, in)
		}
		var bad views.AccountSummary
		assert.ErrorIs(t, json.Unmarshal([]byte(`{"account_id":"0"}`), &bad), entflake.ErrInvalidID)
		assert.ErrorContains(t, json.Unmarshal([]byte(`{"owner_id":"x"}`), &bad), "AccountSummary.owner_id")

		// The owner's row has no owner: null in the view, and in JSON.
		o := client.AccountSummary.Query().Where(accountsummary.Name("owner")).OnlyX(ctx)
		assert.Nil(t, o.OwnerID)
		out, err = json.Marshal(o)
		require.NoError(t, err)
		assert.Contains(t, string(out), fmt.Sprintf(`"id":"%d"`, owner.ID))
		assert.NotContains(t, string(out), "owner_id", "omitempty leaves the nil reference out")

		// The hooks still guard the mutable types' marked fields.
		_, err = client.Transfer.Create().SetAccountID(0).Save(ctx)
		assert.ErrorIs(t, err, entflake.ErrInvalidID)
	})
}
